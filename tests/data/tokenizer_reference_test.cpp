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
#include "tokenizer_corpus.h"
#include "utf8_append.h"

namespace llmt::data {
namespace {

const std::string& kShared = testing::kSharedData;

const Tokenizer& gpt2() {
    static const Tokenizer tok = Tokenizer::load(kShared + "gpt2.tiktoken");
    return tok;
}

std::string from_hex(const std::string& hex) {
    std::string out;
    for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
        out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    return out;
}

using testing::show_ids;

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
        EXPECT_EQ(got, want) << "case " << name << " (" << mode << ")\n got: " << show_ids(got)
                             << "\nwant: " << show_ids(want);
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

std::vector<uint32_t> corpus_ids() { return testing::reference_ids("corpus.tokens.u32le", 1901335); }

TEST(TokenizerReference, WholeCorpusOneThread) {
    testing::expect_encodes_to(gpt2(), testing::reference_corpus(), corpus_ids());
}

TEST(TokenizerReference, WholeCorpusParallelChunks) {
    const std::string text = testing::reference_corpus();
    const auto want = corpus_ids();
    // Small chunks so that there are hundreds of cut points, each of which must not change a token.
    testing::expect_same_ids(encode_parallel(gpt2(), text, false, 2, 8 << 10), want);
    testing::expect_same_ids(encode_parallel(gpt2(), text, true, 3, 64 << 10), want);  // no specials in it
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
    for (uint32_t cp = 0; cp < 0x110000; ++cp) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        for (uint32_t x : {cp, uint32_t{'a'}, cp, uint32_t{'1'}, cp, uint32_t{' '}, cp, cp, uint32_t{'!'}, cp,
                           uint32_t{'\n'}})
            testing::append_utf8(text, x);
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
