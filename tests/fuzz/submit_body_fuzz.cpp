// libFuzzer target for the JSON submit body: the bounded parser (core/json_parse.h) and the server's
// job-request parsing (server/job_request.cpp), as POST /v1/jobs runs them, without a server.
// Contract under test: any bytes give a ParsedJob, or JsonParseError / ApiError / an InputError
// (ConfigValidationError); the error body the router would send serialises without crashing.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "config/loader.h"
#include "core/json_parse.h"
#include "server/api_error.h"
#include "server/job_request.h"

namespace {

void reply_with(const std::string& message, const std::string& field) {
    const auto body = llmt::server::error_body("invalid", message, field);
    (void)body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        const nlohmann::json body = llmt::parse_json(text, "request body");
        if (!body.is_object()) return 0;
        auto parsed = llmt::server::parse_job_request(body, LLMT_SOURCE_DIR "/configs/presets");
        (void)parsed.spec.to_json().dump();
    } catch (const llmt::JsonParseError& e) {
        reply_with(e.what(), e.key_path());
    } catch (const llmt::server::ApiError& e) {
        reply_with(e.what(), e.field());
    } catch (const llmt::InputError& e) {
        reply_with(e.what(), "");
    }
    return 0;
}
