// The chunked body decoder (src/server/http/chunked_decoder.h): decoding fed byte by byte or at once,
// the decoded-size limit, and malformed framing.
#include <gtest/gtest.h>

#include "server/http/chunked_decoder.h"
#include "server/http/http_error.h"

namespace {

using llmt::server::http::ChunkedDecoder;
using llmt::server::http::HttpError;

// Decodes `wire` in pieces of `step` bytes; returns the body and sets *rest to the bytes left over.
std::string decode(const std::string& wire, size_t step, uint64_t limit = 1 << 20, std::string* rest = nullptr) {
    ChunkedDecoder d(limit);
    std::string out;
    size_t pos = 0;
    while (pos < wire.size() && !d.done()) {
        std::string_view piece = std::string_view(wire).substr(pos, step);
        size_t used = d.feed(piece, &out);
        pos += used;
        if (used < piece.size()) break;
    }
    EXPECT_TRUE(d.done());
    if (rest) *rest = wire.substr(pos);
    return out;
}

int refusal(const std::string& wire, uint64_t limit = 1 << 20) {
    try {
        ChunkedDecoder d(limit);
        std::string out;
        d.feed(wire, &out);
    } catch (const HttpError& e) {
        return e.status();
    }
    return 0;
}

TEST(HttpChunkedDecoder, DecodesInAnyPieces) {
    const std::string wire = "5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nTrailer: x\r\n\r\nGET /next";
    for (size_t step : {1u, 2u, 3u, 7u, 1000u}) {
        std::string rest;
        EXPECT_EQ(decode(wire, step, 1 << 20, &rest), "hello, world") << step;
        EXPECT_EQ(rest, "GET /next") << step;  // the next request's bytes are left alone
    }
    EXPECT_EQ(decode("A\r\n0123456789\r\n0\r\n\r\n", 4), "0123456789");
}

TEST(HttpChunkedDecoder, RefusesPastTheLimitBeforeHoldingIt) {
    EXPECT_EQ(refusal("5\r\nhello\r\n0\r\n\r\n", 4), 413);
    EXPECT_EQ(refusal("3\r\nabc\r\n3\r\nabc\r\n0\r\n\r\n", 5), 413);
    // A huge announced chunk is refused from its size line, before any data arrives.
    EXPECT_EQ(refusal("fffffffffffffff\r\n", 1 << 20), 413);
    EXPECT_EQ(refusal("5\r\nhello\r\n0\r\n\r\n", 5), 0);
}

TEST(HttpChunkedDecoder, RefusesMalformedFraming) {
    EXPECT_EQ(refusal("x\r\n"), 400);
    EXPECT_EQ(refusal("5\nhello\r\n"), 400);                 // LF without CR
    EXPECT_EQ(refusal("5\r\nhelloXY"), 400);                 // data not followed by CRLF
    EXPECT_EQ(refusal("1234567890abcdef0\r\n"), 400);        // more than 15 hex digits
    EXPECT_EQ(refusal("5 x\r\n"), 400);
    EXPECT_EQ(refusal(std::string(ChunkedDecoder::kMaxLineBytes + 10, '1')), 400);
    EXPECT_EQ(refusal("0\r\nnot a field\r\n\r\n"), 400);
    std::string long_trailer = "0\r\n";
    for (int i = 0; i < 100; ++i) long_trailer += "X-" + std::to_string(i) + ": " + std::string(200, 'v') + "\r\n";
    EXPECT_EQ(refusal(long_trailer), 400);
}

}  // namespace
