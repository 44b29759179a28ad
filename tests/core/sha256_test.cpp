// SHA-256 against the FIPS 180-2 / NIST CSRC example vectors, plus block-boundary and file cases.
#include "core/sha256.h"

#include "core/error.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace llmt {
namespace {

TEST(Sha256, FipsVectors) {
    EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    EXPECT_EQ(
        sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnop"
                   "qrsmnopqrstnopqrstu"),
        "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
              "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalEqualsOneShotAtEveryBlockBoundary) {
    // Lengths around 55/56/63/64 exercise the one- vs two-block padding paths.
    std::string s;
    for (int i = 0; i < 200; ++i) s += static_cast<char>('A' + i % 57);
    for (std::size_t len : {0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 128, 200}) {
        std::string_view v(s.data(), len);
        for (std::size_t split = 0; split <= len; split += 7) {
            Sha256 h;
            h.update(v.substr(0, split));
            h.update(v.substr(split));
            EXPECT_EQ(h.hex_digest(), sha256_hex(v)) << "len " << len << " split " << split;
        }
    }
}

TEST(Sha256, FileMatchesBytesAndMissingFileThrows) {
    auto dir = std::filesystem::temp_directory_path() / ("llmt_sha256_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::string data(3 * 1024 * 1024 + 17, 'x');  // spans several 1 MiB read blocks
    for (std::size_t i = 0; i < data.size(); i += 4099) data[i] = static_cast<char>(i);
    { std::ofstream(dir / "f.bin", std::ios::binary) << data; }
    EXPECT_EQ(sha256_file(dir / "f.bin"), sha256_hex(data));
    EXPECT_THROW(sha256_file(dir / "missing.bin"), IoError);
    std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace llmt
