// The submit-body fuzz body, shared by the libFuzzer target (submit_body_fuzz.cpp) and the short
// in-gtest run (tests/server/submit_body_fuzz_smoke_test.cpp): the bounded parser (core/json_parse.h)
// the server's job-request parsing (server/jobs/job_request.cpp) and its access policy for the config's
// files (server/jobs/job_access.cpp), as POST /v1/jobs runs them.
// Contract under test: any bytes give a ParsedJob, or JsonParseError / ApiError / an InputError
// (ConfigValidationError); the error body the router would send serialises without crashing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "config/loader.h"
#include "core/json_parse.h"
#include "server/api_error.h"
#include "server/jobs/job_access.h"
#include "server/jobs/job_request.h"
#include "server/estimate/preset_cache.h"

namespace llmt::fuzz {

inline void reply_with_error(const std::string& message, const std::string& field) {
    const auto body = server::error_body("invalid", message, field);
    (void)body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

inline void fuzz_submit_body_one(const uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        const nlohmann::json body = parse_json(text, "request body");
        if (!body.is_object()) return;
        static server::PresetCache presets(LLMT_SOURCE_DIR "/configs/presets");  // as the server keeps one
        auto parsed = server::parse_job_request(body, presets);
        (void)parsed.spec.to_json().dump();
        static const server::JobAccessPolicy policy = [] {
            server::JobAccessPolicy p;
            p.read_roots = {LLMT_SOURCE_DIR "/data"};
            p.denied = {LLMT_SOURCE_DIR "/data/cache"};
            p.relative_base = LLMT_SOURCE_DIR;
            return p;
        }();
        server::check_job_access(*parsed.config, policy);
        (void)server::job_write_overrides(*parsed.config, "/srv/jobs/1");
    } catch (const JsonParseError& e) {
        reply_with_error(e.what(), e.key_path());
    } catch (const server::ApiError& e) {
        reply_with_error(e.what(), e.field());
    } catch (const InputError& e) {
        reply_with_error(e.what(), "");
    }
}

}  // namespace llmt::fuzz
