// Incremental decoder for Transfer-Encoding: chunked request bodies (RFC 9112 7.1) that counts the
// decoded size as it goes and refuses past a limit, so a body is never held beyond it. Fuzzed by
// tests/fuzz/http_request_fuzz.cpp. Not thread-safe; one per request.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace llmt::server::http {

class ChunkedDecoder {
public:
    explicit ChunkedDecoder(uint64_t max_body_bytes) : max_body_bytes_(max_body_bytes) {}
    // Decodes from `in`, appending data to `out`; returns how many bytes of `in` it used (fewer than
    // in.size() only once done(): the rest belongs to the next request). Throws HttpError 400
    // bad_chunk for malformed framing and 413 payload_too_large when the decoded body would pass the limit.
    size_t feed(std::string_view in, std::string* out);
    bool done() const { return state_ == State::kDone; }
    uint64_t decoded_bytes() const { return decoded_; }

    static constexpr size_t kMaxLineBytes = 4096;     // a chunk-size line with its extensions, or a trailer field
    static constexpr size_t kMaxTrailerBytes = 16 << 10;

private:
    enum class State { kSizeLine, kData, kDataEnd, kTrailer, kDone };
    void end_size_line();
    void end_trailer_line();
    State state_ = State::kSizeLine;
    uint64_t max_body_bytes_;
    uint64_t decoded_ = 0;
    uint64_t chunk_left_ = 0;       // data bytes of the current chunk not yet read
    size_t data_end_seen_ = 0;      // bytes of the CRLF after chunk data seen
    size_t trailer_bytes_ = 0;
    std::string line_;              // the line being read, without its LF
};

}  // namespace llmt::server::http
