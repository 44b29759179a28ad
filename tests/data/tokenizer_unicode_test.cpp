// The committed Unicode class table (src/data/tokenizer/unicode_class_table.cpp) against Debian's unicode-data,
// re-derived here for every code point: \p{L} = general category L*, \p{N} = N*, \s = White_Space.
// Also the UTF-8 decoder's handling of invalid sequences.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "data/tokenizer/unicode_class.h"

namespace llmt::data {
namespace {

const std::string kUcd = "/usr/share/unicode/";

TEST(TokenizerUnicode, TableMatchesUnicodeData) {
    std::ifstream pl(kUcd + "PropList.txt"), ud(kUcd + "UnicodeData.txt");
    if (!pl || !ud) GTEST_SKIP() << "Debian's unicode-data is not installed (scripts/setup.sh installs it)";
    std::string first;
    std::getline(pl, first);
    const std::string version = first.substr(first.find('-') + 1, first.rfind(".txt") - first.find('-') - 1);
    // The table is pinned to one Unicode version so that ids do not depend on the build machine; a newer
    // unicode-data is compared only after regenerating the table on purpose (tools/gen_unicode_class.py).
    if (version != kUnicodeClassVersion)
        GTEST_SKIP() << "unicode-data is " << version << ", the table is " << kUnicodeClassVersion;

    std::vector<uint8_t> want(0x110000, 0);
    std::string line;
    uint32_t range_first = 0;
    while (std::getline(ud, line)) {
        std::vector<std::string> f;
        std::stringstream ss(line);
        for (std::string x; std::getline(ss, x, ';');) f.push_back(x);
        ASSERT_GE(f.size(), 3u) << line;
        const uint32_t cp = static_cast<uint32_t>(std::stoul(f[0], nullptr, 16));
        const uint8_t c = f[2][0] == 'L' ? 1 : f[2][0] == 'N' ? 2 : 0;
        if (f[1].find(", First>") != std::string::npos) {
            range_first = cp;
            continue;
        }
        if (f[1].find(", Last>") != std::string::npos) {
            for (uint32_t x = range_first; x <= cp; ++x) want[x] = c;
            continue;
        }
        want[cp] = c;
    }
    pl.seekg(0);
    int spaces = 0;
    while (std::getline(pl, line)) {
        line = line.substr(0, line.find('#'));
        const auto semi = line.find(';');
        if (semi == std::string::npos) continue;
        std::string prop = line.substr(semi + 1);
        prop.erase(0, prop.find_first_not_of(' '));
        prop.erase(prop.find_last_not_of(' ') + 1);
        if (prop != "White_Space") continue;  // not Pattern_White_Space
        const std::string range = line.substr(0, semi);
        const uint32_t lo = static_cast<uint32_t>(std::stoul(range, nullptr, 16));
        const auto dots = range.find("..");
        const uint32_t hi =
            dots == std::string::npos ? lo : static_cast<uint32_t>(std::stoul(range.substr(dots + 2), nullptr, 16));
        for (uint32_t x = lo; x <= hi; ++x, ++spaces) want[x] = 3;
    }
    EXPECT_EQ(spaces, 25);  // White_Space has 25 code points in Unicode 15
    int diffs = 0;
    for (uint32_t cp = 0; cp < 0x110000; ++cp) {
        if (static_cast<uint8_t>(char_class(cp)) != want[cp] && ++diffs < 10)
            ADD_FAILURE() << "U+" << std::hex << cp << ": table " << int(char_class(cp)) << ", data " << int(want[cp]);
    }
    EXPECT_EQ(diffs, 0);
}

TEST(TokenizerUnicode, KnownClasses) {
    EXPECT_EQ(char_class(0x85), CharClass::kSpace);    // NEL: Rust regex \s, not JavaScript \s
    EXPECT_EQ(char_class(0xFEFF), CharClass::kOther);  // BOM: JavaScript \s, not Rust regex \s
    EXPECT_EQ(char_class(0x200B), CharClass::kOther);  // zero-width space is not White_Space
    EXPECT_EQ(char_class(0x3000), CharClass::kSpace);
    EXPECT_EQ(char_class(0x1C), CharClass::kOther);    // FS: Python's isspace(), not White_Space
    EXPECT_EQ(char_class(0x01C5), CharClass::kLetter); // Lt
    EXPECT_EQ(char_class(0x2167), CharClass::kNumber); // Nl (Roman numeral eight)
    EXPECT_EQ(char_class(0x00B2), CharClass::kNumber); // No (superscript two)
    EXPECT_EQ(char_class(0x0301), CharClass::kOther);  // Mn combining acute
    EXPECT_EQ(char_class(0x20000), CharClass::kLetter);  // CJK Extension B (a First/Last range)
    EXPECT_EQ(char_class(0xE000), CharClass::kOther);  // private use
    EXPECT_EQ(char_class(0x110000), CharClass::kOther);
    EXPECT_EQ(char_class(kInvalidCodePoint), CharClass::kOther);
}

TEST(TokenizerUnicode, Utf8DecoderRejectsInvalidSequences) {
    auto dec = [](std::string s, std::size_t* len) {
        return decode_utf8(reinterpret_cast<const unsigned char*>(s.data()), s.size(), len);
    };
    std::size_t len = 0;
    EXPECT_EQ(dec("\xE2\x82\xAC", &len), 0x20ACu);
    EXPECT_EQ(len, 3u);
    EXPECT_EQ(dec("\xF0\x9F\x99\x82", &len), 0x1F642u);
    EXPECT_EQ(len, 4u);
    for (const char* bad : {"\x80", "\xC0\xAF", "\xC1\xBF", "\xE0\x80\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80",
                            "\xF8\x88\x80\x80\x80", "\xE2\x82", "\xC3" "A", "\xFF"}) {
        EXPECT_EQ(dec(bad, &len), kInvalidCodePoint) << bad;
        EXPECT_EQ(len, 1u);
    }
}

}  // namespace
}  // namespace llmt::data
