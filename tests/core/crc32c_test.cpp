// CRC-32C: the published check values, and pieces joined with crc32c_extend equal the whole (this
// crosses the three-stream rounds of the SSE4.2 path at several offsets).
#include "core/crc32c.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

using namespace llmt;

TEST(Crc32c, CheckValues) {
    EXPECT_EQ(crc32c("123456789"), 0xE3069283u);  // the CRC catalogue's check value for CRC-32/ISCSI
    const std::string zeros(32, '\0'), ones(32, '\xff');
    EXPECT_EQ(crc32c(zeros), 0x8A9136AAu);  // RFC 3720 B.4
    EXPECT_EQ(crc32c(ones), 0x62A8AB43u);
    EXPECT_EQ(crc32c(""), 0u);
}

TEST(Crc32c, PiecesEqualWhole) {
    std::vector<std::uint8_t> buf(3 * 3 * 32768 + 4099);
    std::uint32_t x = 12345;
    for (auto& b : buf) b = static_cast<std::uint8_t>((x = x * 1103515245u + 12345u) >> 24);
    const std::uint32_t whole = crc32c(buf.data(), buf.size());
    for (std::size_t cut : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{32768}, std::size_t{98304},
                            std::size_t{98305}, buf.size() - 1, buf.size()}) {
        const std::uint32_t a = crc32c(buf.data(), cut);
        EXPECT_EQ(crc32c_extend(a, buf.data() + cut, buf.size() - cut), whole) << "cut at " << cut;
    }
    buf[buf.size() / 2] ^= 1;
    EXPECT_NE(crc32c(buf.data(), buf.size()), whole);
}

TEST(Crc32c, Text) {
    EXPECT_EQ(crc32c_text(0xE3069283u), "crc32c:e3069283");
    std::uint32_t v = 0;
    EXPECT_TRUE(parse_crc32c_text("crc32c:e3069283", &v));
    EXPECT_EQ(v, 0xE3069283u);
    for (const char* bad : {"", "crc32c:", "crc32c:E3069283", "crc32c:e306928", "crc32c:e30692830", "md5:e3069283",
                            "crc32c:e306928g"})
        EXPECT_FALSE(parse_crc32c_text(bad, &v)) << bad;
}
