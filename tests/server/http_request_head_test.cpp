// The request head parser (src/server/http/request_head.h): fields, decoding, limits and strict framing.
#include <gtest/gtest.h>

#include "server/http/http_error.h"
#include "server/http/request_head.h"

namespace {

using llmt::server::http::find_head_end;
using llmt::server::http::HeadLimits;
using llmt::server::http::HttpError;
using llmt::server::http::parse_request_head;
using llmt::server::http::RequestHead;

RequestHead parse(const std::string& head, HeadLimits limits = {}) { return parse_request_head(head, limits); }

// The status parse_request_head refuses `head` with (0 if it accepts it).
int refusal(const std::string& head, HeadLimits limits = {}) {
    try {
        parse_request_head(head, limits);
    } catch (const HttpError& e) {
        return e.status();
    }
    return 0;
}

TEST(HttpRequestHead, ParsesRequestLineFieldsAndQuery) {
    auto h = parse("GET /v1/jobs%2Fx?state=queued&name=a+b%21&flag HTTP/1.1\r\nHost: x\r\nX-Thing:  v  \r\n\r\n");
    EXPECT_EQ(h.method, "GET");
    EXPECT_EQ(h.path, "/v1/jobs/x");
    EXPECT_EQ(h.target, "/v1/jobs%2Fx?state=queued&name=a+b%21&flag");
    EXPECT_EQ(h.params.find("state")->second, "queued");
    EXPECT_EQ(h.params.find("name")->second, "a b!");
    EXPECT_EQ(h.params.count("flag"), 1u);
    EXPECT_EQ(*h.headers.find("x-thing"), "v");  // names are case-insensitive, values trimmed
    EXPECT_TRUE(h.keep_alive);
    EXPECT_FALSE(h.has_body());
}

TEST(HttpRequestHead, Framing) {
    auto cl = parse("POST /a HTTP/1.1\r\ncontent-length: 12\r\n\r\n");
    EXPECT_EQ(cl.content_length.value(), 12u);
    auto te =
        parse("POST /a HTTP/1.1\r\nTransfer-Encoding: Chunked\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n");
    EXPECT_TRUE(te.chunked);
    EXPECT_TRUE(te.expects_continue);
    EXPECT_FALSE(te.keep_alive);
    EXPECT_FALSE(parse("GET / HTTP/1.0\r\n\r\n").keep_alive);
    // Smuggling shapes: both framings, duplicates, non-digits, other codings.
    EXPECT_EQ(refusal("POST /a HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
    EXPECT_EQ(refusal("POST /a HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n"), 400);
    EXPECT_EQ(refusal("POST /a HTTP/1.1\r\nContent-Length: +5\r\n\r\n"), 400);
    EXPECT_EQ(refusal("POST /a HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n"), 400);
    EXPECT_EQ(refusal("POST /a HTTP/1.1\r\nContent-Length: 1234567890123456789\r\n\r\n"), 400);
    EXPECT_EQ(refusal("POST /a HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"), 400);
    EXPECT_EQ(refusal("POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
    EXPECT_EQ(refusal("POST /a HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
    EXPECT_EQ(refusal("POST /a HTTP/1.1\r\nContent-Length : 5\r\n\r\n"), 400);  // space before ':'
    EXPECT_EQ(refusal("GET /a HTTP/1.1\r\nX: a\r\n b\r\n\r\n"), 400);             // obs-fold
}

TEST(HttpRequestHead, MalformedLines) {
    EXPECT_EQ(refusal("GET /a HTTP/1.1\n\r\n"), 400);
    EXPECT_EQ(refusal("GET /a\r\n\r\n"), 400);
    EXPECT_EQ(refusal("GET  /a HTTP/1.1\r\n\r\n"), 400);
    EXPECT_EQ(refusal("GET http://x/a HTTP/1.1\r\n\r\n"), 400);
    EXPECT_EQ(refusal("GET /a HTTP/2.0\r\n\r\n"), 505);
    EXPECT_EQ(refusal("G(T /a HTTP/1.1\r\n\r\n"), 400);
    EXPECT_EQ(refusal("GET /a%zz HTTP/1.1\r\n\r\n"), 400);
    EXPECT_EQ(refusal("GET /a%00 HTTP/1.1\r\n\r\n"), 400);
    EXPECT_EQ(refusal("GET /a HTTP/1.1\r\nX: a\x01b\r\n\r\n"), 400);
    EXPECT_EQ(refusal("GET /a HTTP/1.1\r\nno colon\r\n\r\n"), 400);
    EXPECT_EQ(refusal("\r\n\r\n"), 400);
    // Empty lines before the request line are skipped (RFC 9112 2.2).
    EXPECT_EQ(parse("\r\nGET /a HTTP/1.1\r\n\r\n").path, "/a");
}

TEST(HttpRequestHead, Limits) {
    HeadLimits small;
    small.max_target_bytes = 16;
    small.max_fields = 2;
    small.max_head_bytes = 100;
    EXPECT_EQ(refusal("GET /" + std::string(20, 'a') + " HTTP/1.1\r\n\r\n", small), 414);
    EXPECT_EQ(refusal("GET /a HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", small), 431);
    EXPECT_EQ(refusal("GET /a HTTP/1.1\r\nA: " + std::string(100, 'x') + "\r\n\r\n", small), 431);
    EXPECT_EQ(refusal("GET /a HTTP/1.1\r\nA: 1\r\nB: 2\r\n\r\n", small), 0);
}

TEST(HttpRequestHead, FindsTheEndOfTheHead) {
    EXPECT_FALSE(find_head_end("GET / HTTP/1.1\r\nHost: x\r\n"));
    EXPECT_EQ(find_head_end("GET / HTTP/1.1\r\n\r\nbody").value(), 18u);
    EXPECT_FALSE(find_head_end("\r\n\r\n"));  // empty lines only: no request yet
}

}  // namespace
