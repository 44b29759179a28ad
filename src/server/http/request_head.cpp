// Request head parsing, strict: see request_head.h. Every refusal names what was wrong.
#include "server/http/request_head.h"

#include <fmt/format.h>

#include "server/http/http_error.h"

namespace llmt::server::http {

namespace {

[[noreturn]] void bad(const std::string& msg) { throw HttpError(400, "bad_request", msg); }

// RFC 9110 5.6.2 tchar.
bool is_tchar(char c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
    return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view s) {
    if (s.empty()) return false;
    for (char c : s)
        if (!is_tchar(c)) return false;
    return true;
}

// Field values: visible bytes, spaces, tabs and obs-text; never other control bytes (CR, LF, NUL).
bool is_field_value(std::string_view s) {
    for (char c : s) {
        auto u = static_cast<unsigned char>(c);
        if ((u < 0x20 && c != '\t') || u == 0x7f) return false;
    }
    return true;
}

std::string_view trim_ows(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// A quoted, shortened copy of caller bytes for messages.
std::string quoted(std::string_view s) {
    std::string out;
    for (char c : s.substr(0, 64))
        out += static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f ? '?' : c;
    return "'" + out + (s.size() > 64 ? "...'" : "'");
}

void parse_request_line(std::string_view line, const HeadLimits& limits, RequestHead* h) {
    size_t sp1 = line.find(' ');
    size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
        bad("the request line must be METHOD SP TARGET SP HTTP-VERSION, got " + quoted(line));
    std::string_view method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1),
                     version = line.substr(sp2 + 1);
    if (!is_token(method)) bad("the method " + quoted(method) + " is not a token");
    if (target.size() > limits.max_target_bytes)
        throw HttpError(
            414, "uri_too_long",
            fmt::format("the request target is {} bytes; the limit is {}", target.size(), limits.max_target_bytes));
    if (target.empty() || target.front() != '/')
        bad("the request target must be a path starting with '/', got " + quoted(target));
    for (char c : target)
        if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f)
            bad("the request target holds a byte that must be percent-encoded");
    if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' || version[5] < '0' ||
        version[5] > '9' || version[7] < '0' || version[7] > '9')
        bad("the request line must end with HTTP/1.1 or HTTP/1.0, got " + quoted(version));
    if (version[5] != '1')
        throw HttpError(505, "http_version_not_supported", "only HTTP/1.x is served, got " + quoted(version));
    h->method = std::string(method);
    h->target = std::string(target);
    h->minor_version = version[7] - '0';
    size_t q = target.find('?');
    h->path = percent_decode(target.substr(0, q), false);
    if (q == std::string_view::npos) return;
    std::string_view query = target.substr(q + 1);
    size_t hash = query.find('#');
    if (hash != std::string_view::npos) query = query.substr(0, hash);
    while (!query.empty()) {
        size_t amp = query.find('&');
        std::string_view pair = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
        if (pair.empty()) continue;
        size_t eq = pair.find('=');
        std::string key = percent_decode(pair.substr(0, eq), true);
        std::string value = eq == std::string_view::npos ? std::string() : percent_decode(pair.substr(eq + 1), true);
        h->params.emplace(std::move(key), std::move(value));
    }
}

uint64_t parse_content_length(std::string_view v) {
    if (v.empty() || v.size() > 18) bad("Content-Length must be 1 to 18 decimal digits, got " + quoted(v));
    uint64_t n = 0;
    for (char c : v) {
        if (c < '0' || c > '9') bad("Content-Length must be decimal digits only, got " + quoted(v));
        n = n * 10 + static_cast<uint64_t>(c - '0');
    }
    return n;
}

// Content-Length, Transfer-Encoding, Connection and Expect, checked together.
void read_framing(RequestHead* h) {
    const Headers& hs = h->headers;
    if (hs.count("Content-Length") > 1) bad("more than one Content-Length field");
    if (hs.count("Transfer-Encoding") > 1) bad("more than one Transfer-Encoding field");
    if (const std::string* te = hs.find("Transfer-Encoding")) {
        if (!iequals(*te, "chunked"))
            bad("Transfer-Encoding " + quoted(*te) + " is not supported; only 'chunked' is");
        if (h->minor_version == 0) bad("Transfer-Encoding is not allowed in HTTP/1.0");
        h->chunked = true;
    }
    if (const std::string* cl = hs.find("Content-Length")) {
        if (h->chunked) bad("both Content-Length and Transfer-Encoding are set; send one");
        h->content_length = parse_content_length(*cl);
    }
    h->keep_alive = h->minor_version >= 1;
    if (const std::string* conn = hs.find("Connection")) {
        std::string_view v = *conn;
        while (!v.empty()) {
            size_t comma = v.find(',');
            std::string_view opt = trim_ows(v.substr(0, comma));
            v = comma == std::string_view::npos ? std::string_view() : v.substr(comma + 1);
            if (iequals(opt, "close")) h->keep_alive = false;
            if (iequals(opt, "keep-alive") && h->minor_version == 0) h->keep_alive = true;
        }
    }
    if (const std::string* expect = hs.find("Expect")) h->expects_continue = iequals(*expect, "100-continue");
}

}  // namespace

std::optional<size_t> find_head_end(std::string_view buf) {
    size_t start = 0;
    while (buf.substr(start, 2) == "\r\n") start += 2;  // empty lines before the request line
    size_t end = buf.find("\r\n\r\n", start);
    if (end == std::string_view::npos) return std::nullopt;
    return end + 4;
}

std::string percent_decode(std::string_view s, bool plus_is_space) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
        char c = s[i];
        if (c == '%') {
            int hi = i + 2 < s.size() ? hex_value(s[i + 1]) : -1;
            int lo = i + 2 < s.size() ? hex_value(s[i + 2]) : -1;
            if (hi < 0 || lo < 0) bad("a '%' in the request target is not followed by two hex digits");
            c = static_cast<char>(hi * 16 + lo);
            i += 2;
        } else if (c == '+' && plus_is_space) {
            c = ' ';
        }
        if (c == '\0') bad("the request target decodes to a NUL byte");
        out += c;
    }
    return out;
}

RequestHead parse_request_head(std::string_view head, const HeadLimits& limits) {
    if (head.size() > limits.max_head_bytes)
        throw HttpError(431, "header_too_large",
                        fmt::format("the request head is over {} bytes", limits.max_head_bytes));
    while (head.substr(0, 2) == "\r\n") head.remove_prefix(2);
    if (head.size() < 4 || head.substr(head.size() - 4) != "\r\n\r\n")
        bad("the request head does not end with an empty line");
    head.remove_suffix(2);  // each line now ends with "\r\n"
    RequestHead h;
    bool first = true;
    size_t fields = 0;
    while (!head.empty()) {
        size_t eol = head.find("\r\n");
        if (eol == std::string_view::npos) bad("a line of the request head does not end with CRLF");
        std::string_view line = head.substr(0, eol);
        head.remove_prefix(eol + 2);
        if (line.find('\r') != std::string_view::npos || line.find('\n') != std::string_view::npos)
            bad("a bare CR or LF inside the request head");
        if (first) {
            parse_request_line(line, limits, &h);
            first = false;
            continue;
        }
        if (++fields > limits.max_fields)
            throw HttpError(431, "header_too_large", fmt::format("more than {} header fields", limits.max_fields));
        if (!line.empty() && (line.front() == ' ' || line.front() == '\t'))
            bad("header fields folded over lines (obs-fold) are not accepted");
        size_t colon = line.find(':');
        if (colon == std::string_view::npos) bad("a header line has no ':': " + quoted(line));
        std::string_view name = line.substr(0, colon), value = trim_ows(line.substr(colon + 1));
        if (!is_token(name)) bad("the header name " + quoted(name) + " is not a token (no spaces before ':')");
        if (!is_field_value(value)) bad("the value of header " + quoted(name) + " holds control bytes");
        h.headers.add(std::string(name), std::string(value));
    }
    if (first) bad("the request line is missing");
    read_framing(&h);
    return h;
}

}  // namespace llmt::server::http
