// Our GPT-2 tokenizer against tiktoken's own ids (../shared/data, README there): every case of
// tokenizer_cases.jsonl (ids and, for ordinary mode, the pre-token pieces) and the whole 6.98 MB
// reference corpus (built by make_corpus.sh from Debian packages; ids in corpus.tokens.u32le).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/fs.h"
#include "core/sha256.h"
#include "data/tokenizer/tokenizer.h"
#include "data/tokenizer/tokenizer_pretokenize.h"
#include "fuzz/tokenizer_fuzz_body.h"
#include "support/compare.h"

namespace llmt::data {
namespace {

const std::string kShared = LLMT_SHARED_DIR "/data/";

const Tokenizer& gpt2() {
    static const Tokenizer tok = Tokenizer::load(kShared + "gpt2.tiktoken");
    return tok;
}

std::string from_hex(const std::string& hex) {
    std::string out;
    for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    return out;
}

std::string show(const std::vector<uint32_t>& ids) {
    std::string s;
    for (std::size_t i = 0; i < ids.size() && i < 64; ++i) s += std::to_string(ids[i]) + " ";
    return s + (ids.size() > 64 ? "..." : "");
}

TEST(TokenizerReference, Gpt2FileIdentity) {
    EXPECT_EQ(gpt2().vocab_size(), 50257u);
    EXPECT_EQ(gpt2().eot_token(), 50256u);
    EXPECT_EQ(gpt2().source_sha256(), "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930");
}

TEST(TokenizerReference, AllCasesOfTokenizerCasesJsonl) {
    std::ifstream in(kShared + "tokenizer_cases.jsonl");
    ASSERT_TRUE(in) << kShared << "tokenizer_cases.jsonl";
    std::string line;
    int n = 0, ordinary = 0;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        const auto c = nlohmann::json::parse(line);
        const std::string name = c["name"], mode = c["mode"];
        const std::string text = from_hex(c["utf8_hex"]);
        const auto want = c["ids"].get<std::vector<uint32_t>>();
        ASSERT_TRUE(mode == "ordinary" || mode == "allow_all") << name << ": mode " << mode;
        const auto got = mode == "ordinary" ? gpt2().encode_ordinary(text) : gpt2().encode(text, true);
        EXPECT_EQ(got, want) << "case " << name << " (" << mode << ")\n got: " << show(got) << "\nwant: " << show(want);
        EXPECT_EQ(gpt2().decode(got), text) << "case " << name;
        if (mode == "ordinary") {
            ++ordinary;
            const auto want_pieces = c["pieces"].get<std::vector<std::string>>();
            const auto pieces = gpt2_pretokenize(text);
            EXPECT_EQ(std::vector<std::string>(pieces.begin(), pieces.end()), want_pieces) << "case " << name;
            // The fuzz oracle (a literal transcription of the regex) is checked against tiktoken too.
            const auto oracle = fuzz::oracle_pretokenize(text);
            EXPECT_EQ(std::vector<std::string>(oracle.begin(), oracle.end()), want_pieces) << "oracle, case " << name;
            // encode(text, false) is encode_ordinary
            EXPECT_EQ(gpt2().encode(text, false), want) << "case " << name;
        }
        ++n;
    }
    EXPECT_EQ(n, 565);  // README: 565 cases; fewer means the file was not read whole
    EXPECT_GT(ordinary, 500);
}

// The corpus is rebuilt in the build directory when missing or different (make_corpus.sh needs the
// Debian packages bible-kjv and fortunes, fortunes-min that scripts/setup.sh installs).
std::string reference_corpus() {
    const std::string kSha = "1021d9575220966c33be32eff97cf202baefa4cfeb22204620168f7ab1cc174c";
    const std::filesystem::path path = std::filesystem::path(LLMT_BINARY_DIR) / "tokenizer_corpus.txt";
    std::error_code ec;
    if (!std::filesystem::exists(path, ec) || sha256_file(path) != kSha) {
        // A temp name per process: ctest -j runs several tests of this file at once, and a shared temp
        // name made one test's mv fail while the other was writing it.
        const std::string tmp = path.string() + ".tmp." + std::to_string(::getpid());
        const std::string cmd = "sh " + kShared + "make_corpus.sh " + tmp + " && mv " + tmp + " " + path.string();
        EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    }
    std::string text = read_file(path);
    EXPECT_EQ(sha256_hex(text), kSha) << path << " is not the reference corpus (are bible-kjv, fortunes installed?)";
    return text;
}

std::vector<uint32_t> reference_ids() {
    const std::string raw = read_file(kShared + "corpus.tokens.u32le");
    std::vector<uint32_t> ids(raw.size() / 4);
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const auto* p = reinterpret_cast<const unsigned char*>(raw.data()) + 4 * i;
        ids[i] = uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
    }
    return ids;
}

void expect_same_ids(const std::vector<uint32_t>& got, const std::vector<uint32_t>& want) {
    ASSERT_EQ(want.size(), 1901335u);
    ASSERT_TRUE(support::comparable(got, want));
    std::size_t i = 0;
    while (i < got.size() && got[i] == want[i]) ++i;
    EXPECT_EQ(i, want.size()) << "first difference at token " << i;
}

TEST(TokenizerReference, WholeCorpusOneThread) {
    const std::string text = reference_corpus();
    const auto got = gpt2().encode_ordinary(text);
    expect_same_ids(got, reference_ids());
    EXPECT_EQ(gpt2().decode(got), text);
}

TEST(TokenizerReference, WholeCorpusParallelChunks) {
    const std::string text = reference_corpus();
    // Small chunks so that there are hundreds of cut points, each of which must not change a token.
    expect_same_ids(encode_parallel(gpt2(), text, false, 2, 8 << 10), reference_ids());
    expect_same_ids(encode_parallel(gpt2(), text, true, 3, 64 << 10), reference_ids());  // no specials in it
}


// Every code point U+0000..U+10FFFF (surrogates excepted), each in the contexts the pre-tokenizer
// branches on: "c a c 1 c SPACE c c ! c LF" (no spaces between; 1,112,064 lines, 33 MB). The expected ids
// are those of npm tiktoken 1.0.22 (OpenAI's Rust core as WASM, the same regex engine as Python
// tiktoken), recorded as the sha256 of their little-endian uint32 bytes, computed on 2026-11-26 with
//   node -e "const t=require('./bench/.npm/node_modules/tiktoken').get_encoding('gpt2');
//            process.stdout.write(Buffer.from(new Uint32Array(t.encode_ordinary(TEXT)).buffer))" | sha256sum
// This pins the Unicode letter/number/space tables to tiktoken's for every code point, not just the
// ones tokenizer_cases.jsonl happens to hold. On a mismatch, rerun that with bench/tokenizer/setup.sh's
// packages to find the first differing id.
TEST(TokenizerReference, EveryCodePointMatchesNpmTiktoken) {
    std::string text;
    text.reserve(34u << 20);
    auto put = [&](uint32_t cp) {
        if (cp < 0x80) {
            text.push_back(static_cast<char>(cp));
        } else if (cp < 0x800) {
            text.push_back(static_cast<char>(0xC0 | (cp >> 6)));
            text.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        } else if (cp < 0x10000) {
            text.push_back(static_cast<char>(0xE0 | (cp >> 12)));
            text.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
            text.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        } else {
            text.push_back(static_cast<char>(0xF0 | (cp >> 18)));
            text.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
            text.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
            text.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        }
    };
    for (uint32_t cp = 0; cp < 0x110000; ++cp) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        for (uint32_t x : {cp, uint32_t{'a'}, cp, uint32_t{'1'}, cp, uint32_t{' '}, cp, cp, uint32_t{'!'}, cp,
                           uint32_t{'\n'}})
            put(x);
    }
    ASSERT_EQ(sha256_hex(text), "04b48ee034f72168a5019a9760fe5a9894574969f34aba4829d4bd78279b0b02");
    const auto ids = encode_parallel(gpt2(), text, false, 2);
    std::string bytes(ids.size() * 4, '\0');
    for (std::size_t i = 0; i < ids.size(); ++i) {
        for (int k = 0; k < 4; ++k) bytes[4 * i + k] = static_cast<char>((ids[i] >> (8 * k)) & 0xFF);
    }
    EXPECT_EQ(ids.size(), 31631779u);
    EXPECT_EQ(sha256_hex(bytes), "0b12181fa3d78ca0908b543e00a6ae527f75c7dfa5291253f9c1e24bd412327a");
}

}  // namespace
}  // namespace llmt::data
