// libFuzzer target for the HTTP request head parser and the chunked body decoder (src/server/http).
// Contract under test: any bytes either parse or throw HttpError with a 4xx/5xx status; a parsed head
// never has both framings; the chunked decoder gives the same body (or the same refusal) whether fed
// at once or in pieces, never holds more than its limit, and leaves bytes after the body alone.
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "server/http/chunked_decoder.h"
#include "server/http/http_error.h"
#include "server/http/request_head.h"

namespace {

using namespace llmt::server::http;

struct Decoded {
    std::string body;
    int status = 0;     // the refusal's status, 0 when it decoded
    size_t used = 0;    // input bytes used
    bool done = false;
};

Decoded decode(std::string_view in, size_t step, uint64_t limit) {
    Decoded d;
    ChunkedDecoder dec(limit);
    try {
        while (d.used < in.size() && !dec.done()) {
            std::string_view piece = in.substr(d.used, step);
            size_t n = dec.feed(piece, &d.body);
            if (n > piece.size()) std::abort();
            d.used += n;
            if (n < piece.size() && !dec.done()) std::abort();  // only a finished body leaves bytes unused
        }
    } catch (const HttpError& e) {
        if (e.status() != 400 && e.status() != 413) std::abort();
        d.status = e.status();
    }
    if (d.body.size() > limit || dec.decoded_bytes() != d.body.size()) std::abort();
    d.done = dec.done();
    return d;
}

void check_chunked(std::string_view in, size_t step) {
    const uint64_t limit = 4096;
    Decoded whole = decode(in, in.size() + 1, limit), pieces = decode(in, step, limit);
    if (whole.status != pieces.status || whole.done != pieces.done) std::abort();
    if (whole.status == 0 && (whole.body != pieces.body || whole.used != pieces.used)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const size_t step = 1 + data[0] % 17;
    std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
    HeadLimits limits;
    limits.max_head_bytes = 2048;  // small limits so the fuzzer reaches them
    limits.max_fields = 8;
    limits.max_target_bytes = 256;
    std::optional<size_t> end = find_head_end(in);
    if (!end) {
        check_chunked(in, step);  // inputs without a head exercise the decoder alone
        return 0;
    }
    try {
        RequestHead h = parse_request_head(in.substr(0, *end), limits);
        if (h.chunked && h.content_length) std::abort();
        if (h.path.empty() || h.path.find('\0') != std::string::npos) std::abort();
        if (h.headers.fields().size() > limits.max_fields) std::abort();
        if (h.chunked) check_chunked(in.substr(*end), step);
    } catch (const HttpError& e) {
        if (e.status() < 400 || e.status() > 599) std::abort();
    }
    return 0;
}
