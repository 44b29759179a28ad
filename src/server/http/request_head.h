// The request head parser: request line and header fields of one HTTP/1.1 request (RFC 9112 sections
// 2-3, 5-6), as a pure function of the bytes so it can be fuzzed (tests/fuzz/http_request_fuzz.cpp).
// Framing is strict, so no two readers can disagree on where a body ends (request smuggling): at most
// one Content-Length, of digits only; Transfer-Encoding only "chunked"; both together are refused.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "server/http/headers.h"

namespace llmt::server::http {

struct HeadLimits {
    size_t max_head_bytes = 16 << 10;   // request line + fields + the blank line
    size_t max_fields = 100;
    size_t max_target_bytes = 8 << 10;
};

struct RequestHead {
    std::string method;                               // "GET", as sent (methods are case-sensitive)
    std::string target;                               // "/v1/jobs?state=queued", as sent
    std::string path;                                 // percent-decoded path of the target
    std::multimap<std::string, std::string> params;   // percent-decoded query parameters ('+' is a space)
    int minor_version = 1;                            // HTTP/1.<minor>
    Headers headers;
    std::optional<uint64_t> content_length;
    bool chunked = false;                             // Transfer-Encoding: chunked
    bool keep_alive = true;                           // HTTP/1.1 without "Connection: close"
    bool expects_continue = false;                    // Expect: 100-continue
    bool has_body() const { return chunked || content_length.value_or(0) > 0; }
};

// Offset just past the blank line that ends the head in `buf` ("\r\n\r\n"), or nullopt when it has not
// arrived yet. Leading empty lines (allowed before a request line) are part of the head.
std::optional<size_t> find_head_end(std::string_view buf);

// Parses `head` (the bytes up to and including the blank line). Throws HttpError: 400 bad_request for
// malformed lines or framing, 414 uri_too_long, 431 header_too_large, 505 http_version_not_supported.
RequestHead parse_request_head(std::string_view head, const HeadLimits& limits);

// %XX decoding; `plus_is_space` for query strings. Throws HttpError 400 on a bad escape or a NUL byte.
std::string percent_decode(std::string_view s, bool plus_is_space);

}  // namespace llmt::server::http
