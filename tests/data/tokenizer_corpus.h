// The tokenizers' whole-corpus reference: the 6.98 MB text make_corpus.sh builds from Debian packages
// (bible-kjv, fortunes, fortunes-min, installed by scripts/setup.sh), and the ids a reference tokenizer wrote
// for it (tiktoken for GPT-2, Hugging Face `tokenizers` for Llama 3), both in the shared test data.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "core/fs.h"
#include "core/sha256.h"
#include "data/tokenizer/tokenizer.h"
#include "support/compare.h"

namespace llmt::data::testing {

inline const std::string kSharedData = LLMT_SHARED_DIR "/data/";

// The corpus, rebuilt in the build directory when missing or different.
inline std::string reference_corpus() {
    const std::string kSha = "1021d9575220966c33be32eff97cf202baefa4cfeb22204620168f7ab1cc174c";
    const std::filesystem::path path = std::filesystem::path(LLMT_BINARY_DIR) / "tokenizer_corpus.txt";
    std::error_code ec;
    if (!std::filesystem::exists(path, ec) || sha256_file(path) != kSha) {
        // A temp name per process: ctest -j runs several tests of these files at once, and a shared temp
        // name made one test's mv fail while the other was writing it.
        const std::string tmp = path.string() + ".tmp." + std::to_string(::getpid());
        const std::string cmd = "sh " + kSharedData + "make_corpus.sh " + tmp + " && mv " + tmp + " " + path.string();
        EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    }
    std::string text = read_file(path);
    EXPECT_EQ(sha256_hex(text), kSha) << path << " is not the reference corpus (are bible-kjv, fortunes installed?)";
    return text;
}

// The `count` ids of a shared-data file of little-endian uint32 (corpus.tokens.u32le,
// corpus.llama3.tokens.u32le); fewer fail the test (the file was not read whole).
inline std::vector<uint32_t> reference_ids(const std::string& file, std::size_t count) {
    const std::string raw = read_file(kSharedData + file);
    std::vector<uint32_t> ids(raw.size() / 4);
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const auto* p = reinterpret_cast<const unsigned char*>(raw.data()) + 4 * i;
        ids[i] = uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
    }
    EXPECT_EQ(ids.size(), count) << file;
    return ids;
}

// The first 64 ids, for a failure message.
inline std::string show_ids(const std::vector<uint32_t>& ids) {
    std::string s;
    for (std::size_t i = 0; i < ids.size() && i < 64; ++i) s += std::to_string(ids[i]) + " ";
    return s + (ids.size() > 64 ? "..." : "");
}

// got equals want; a failure names the first differing token.
inline void expect_same_ids(const std::vector<uint32_t>& got, const std::vector<uint32_t>& want) {
    ASSERT_TRUE(support::comparable(got, want));
    std::size_t i = 0;
    while (i < got.size() && got[i] == want[i]) ++i;
    EXPECT_EQ(i, want.size()) << "first difference at token " << i;
}

// The corpus through tok's ordinary encoding is `want`, and decodes back to the text.
inline void expect_encodes_to(const Tokenizer& tok, const std::string& text, const std::vector<uint32_t>& want) {
    const std::vector<uint32_t> got = tok.encode_ordinary(text);
    expect_same_ids(got, want);
    EXPECT_EQ(tok.decode(got), text);
}

}  // namespace llmt::data::testing
