// Unit tests of the GPT-2 tokenizer beyond the tiktoken reference files: round trips on random Unicode,
// the invalid-UTF-8 policy, special tokens, batch/parallel encoders, and loading errors.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

#include "core/error.h"
#include "core/fs.h"
#include "data/tokenizer/tokenizer.h"
#include "data/tokenizer/tokenizer_pretokenize.h"
#include "utf8_append.h"

namespace llmt::data {
namespace {

namespace fs = std::filesystem;
const std::string kGpt2File = LLMT_SHARED_DIR "/data/gpt2.tiktoken";

const Tokenizer& gpt2() {
    static const Tokenizer tok = Tokenizer::load(kGpt2File);
    return tok;
}

using testing::append_utf8;

// Random valid UTF-8 drawn from many scripts and from the characters the pre-tokenizer cares about
// (whitespace of every kind, apostrophes, digits, combining marks, emoji, unassigned and private use).
std::string random_text(std::mt19937_64& rng, std::size_t n_chars) {
    static const std::vector<std::pair<uint32_t, uint32_t>> ranges = {
        {0x20, 0x7E},       {0x09, 0x0D},       {0x80, 0xFF},       {0x100, 0x24F},     {0x370, 0x3FF},
        {0x400, 0x4FF},     {0x590, 0x5FF},     {0x600, 0x6FF},     {0x900, 0x97F},     {0xE00, 0xE7F},
        {0x300, 0x36F},     {0x1100, 0x11FF},   {0x2000, 0x206F},   {0x3000, 0x303F},   {0x3040, 0x30FF},
        {0x4E00, 0x9FFF},   {0xAC00, 0xD7A3},   {0xE000, 0xF8FF},   {0xFE00, 0xFEFF},   {0xFF00, 0xFFEF},
        {0x1F300, 0x1FAFF}, {0x10000, 0x1034F}, {0x1D400, 0x1D7FF}, {0x20000, 0x2A6DF}, {0xE0000, 0xE007F},
        {0x10FF00, 0x10FFFF}};
    static const std::vector<uint32_t> specials = {' ', ' ', ' ', '\'', '\n', 0x85, 0xA0, 0x1680, 0x2028,
                                                   0x3000, 0xFEFF, 0x200B, 0x200D, 's', 't', 'l', 'r', 'e', '0'};
    std::string s;
    for (std::size_t i = 0; i < n_chars; ++i) {
        uint32_t cp;
        if (rng() % 3 == 0) {
            cp = specials[rng() % specials.size()];
        } else {
            const auto& [lo, hi] = ranges[rng() % ranges.size()];
            cp = lo + static_cast<uint32_t>(rng() % (hi - lo + 1));
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
        append_utf8(s, cp);
    }
    return s;
}

TEST(Tokenizer, RoundTripRandomUnicode) {
    const uint64_t seed = 20241126;
    std::mt19937_64 rng(seed);
    for (int i = 0; i < 3000; ++i) {
        const std::size_t len = i < 200 ? static_cast<std::size_t>(i) : rng() % (i % 10 == 0 ? 5000 : 300);
        const std::string text = random_text(rng, len);
        const auto ids = gpt2().encode_ordinary(text);
        ASSERT_EQ(gpt2().decode(ids), text) << "seed " << seed << " iteration " << i;
        // The pieces tile the text and none is empty.
        std::string joined;
        for (auto p : gpt2_pretokenize(text)) {
            ASSERT_FALSE(p.empty());
            joined += p;
        }
        ASSERT_EQ(joined, text) << "seed " << seed << " iteration " << i;
    }
}

TEST(Tokenizer, WhitespaceFollowsRustRegex) {
    // U+0085 (NEL) is \s for tiktoken's Rust regex, U+FEFF (BOM) is not: JavaScript's \s is the opposite.
    using V = std::vector<std::string_view>;
    EXPECT_EQ(gpt2_pretokenize("a\xC2\x85\xC2\x85" "b"), (V{"a", "\xC2\x85", "\xC2\x85", "b"}));
    EXPECT_EQ(gpt2_pretokenize("a\xEF\xBB\xBF" "b"), (V{"a", "\xEF\xBB\xBF", "b"}));
    EXPECT_EQ(gpt2_pretokenize("a \xEF\xBB\xBF!"), (V{"a", " \xEF\xBB\xBF!"}));
    // \s+(?!\S) leaves the last space for " word"; a run at the end of the text stays whole.
    EXPECT_EQ(gpt2_pretokenize("a   b  "), (V{"a", "  ", " b", "  "}));
    EXPECT_EQ(gpt2_pretokenize("x\t\n y"), (V{"x", "\t\n", " y"}));
    EXPECT_EQ(gpt2_pretokenize("x\n\ny"), (V{"x", "\n", "\n", "y"}));
    // Ideographic space (U+3000) is whitespace and multi-byte: the backtrack is by character.
    EXPECT_EQ(gpt2_pretokenize("a\xE3\x80\x80\xE3\x80\x80" "b"), (V{"a", "\xE3\x80\x80", "\xE3\x80\x80", "b"}));
    EXPECT_EQ(gpt2_pretokenize("don't 'tis ''s"), (V{"don", "'t", " '", "tis", " ''", "s"}));
}

TEST(Tokenizer, InvalidUtf8IsEncodedBytewise) {
    using V = std::vector<std::string_view>;
    // Invalid bytes are characters of the "other" class: they join punctuation runs, split letter runs.
    EXPECT_EQ(gpt2_pretokenize("a\xFF" "b"), (V{"a", "\xFF", "b"}));
    EXPECT_EQ(gpt2_pretokenize(" \x80\x80!x"), (V{" \x80\x80!", "x"}));
    EXPECT_EQ(gpt2_pretokenize("\xC3(\xE2\x82"), (V{"\xC3(\xE2\x82"}));  // truncated sequences
    EXPECT_EQ(gpt2_pretokenize("\xED\xA0\x80" "a"), (V{"\xED\xA0\x80", "a"}));  // a UTF-8 surrogate
    std::mt19937_64 rng(7);
    for (int i = 0; i < 2000; ++i) {
        std::string bytes(rng() % 200, '\0');
        for (auto& c : bytes) c = static_cast<char>(rng());
        EXPECT_EQ(gpt2().decode(gpt2().encode_ordinary(bytes)), bytes) << "seed 7 iteration " << i;
    }
    // A lone byte >= 0x80 is the byte's own token (tiktoken's byte-level alphabet).
    const auto ids = gpt2().encode_ordinary("\xFF");
    ASSERT_EQ(ids.size(), 1u);
    EXPECT_EQ(gpt2().token_bytes(ids[0]), "\xFF");
}

TEST(Tokenizer, SpecialTokensOnlyWhenAllowed) {
    const std::string text = "Hello<|endoftext|>world<|endoftext|>";
    const auto with = gpt2().encode(text, true);
    EXPECT_EQ(with, (std::vector<uint32_t>{15496, 50256, 6894, 50256}));
    const auto without = gpt2().encode(text, false);
    EXPECT_EQ(without, gpt2().encode_ordinary(text));
    EXPECT_EQ(std::count(without.begin(), without.end(), 50256u), 0);
    EXPECT_EQ(gpt2().decode(with), text);
    EXPECT_EQ(gpt2().decode(without), text);
    EXPECT_EQ(gpt2().special_tokens().size(), 1u);
}

TEST(Tokenizer, DecodeRejectsUnknownIds) {
    const std::vector<uint32_t> ids = {64, 50257};
    try {
        gpt2().decode(ids);
        FAIL() << "no exception";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("50257 (at index 1)"), std::string::npos) << e.what();
    }
    EXPECT_THROW(gpt2().token_bytes(1u << 31), InputError);
    EXPECT_EQ(gpt2().decode(std::vector<uint32_t>{}), "");
}

TEST(Tokenizer, BatchAndParallelEqualSequential) {
    std::mt19937_64 rng(11);
    std::vector<std::string> docs;
    std::string big;
    for (int i = 0; i < 300; ++i) {
        docs.push_back(random_text(rng, rng() % 400) + (i % 7 == 0 ? "<|endoftext|>" : "") + "\nA line.\nB");
        big += docs.back();
    }
    std::vector<std::string_view> views(docs.begin(), docs.end());
    for (bool special : {false, true}) {
        for (int threads : {0, 1, 3}) {
            const auto batch = encode_batch(gpt2(), views, special, threads);
            ASSERT_EQ(batch.size(), docs.size());
            for (std::size_t i = 0; i < docs.size(); ++i) ASSERT_EQ(batch[i], gpt2().encode(docs[i], special)) << i;
        }
        // Tiny chunks: many cut points, including next to the special tokens.
        const auto whole = gpt2().encode(big, special);
        EXPECT_EQ(encode_parallel(gpt2(), big, special, 2, 64), whole);
        EXPECT_EQ(encode_parallel(gpt2(), big, special, 4, 1000), whole);
    }
}

TEST(Tokenizer, CopiesShareTheVocabulary) {
    Tokenizer copy = gpt2();
    EXPECT_EQ(copy.encode_ordinary("Hello world"), (std::vector<uint32_t>{15496, 995}));
    EXPECT_EQ(copy.source_sha256(), gpt2().source_sha256());
}

// --- loading errors -------------------------------------------------------------------------------

struct TempDir {
    fs::path path;
    TempDir() {
        path = fs::temp_directory_path() / ("llmt_tok_test_" + std::to_string(::getpid()) + "_" +
                                            std::to_string(std::random_device{}()));
        fs::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

std::string error_of(const std::string& spec) {
    try {
        Tokenizer::load(spec);
    } catch (const InputError& e) {  // FormatError is an InputError
        return e.what();
    }
    return "(no error)";
}

TEST(TokenizerLoad, MissingFileNamesTheSpec) {
    const std::string msg = error_of("/nonexistent/dir/r50k.tiktoken");
    EXPECT_NE(msg.find("/nonexistent/dir/r50k.tiktoken"), std::string::npos) << msg;
    EXPECT_NE(msg.find("no such file"), std::string::npos) << msg;
}

TEST(TokenizerLoad, CorruptTiktokenNamesFileAndLine) {
    TempDir dir;
    std::string good = read_file(kGpt2File);
    // Line 3 gets a rank that is not a number.
    std::string bad = good;
    std::size_t p = 0;
    for (int i = 0; i < 2; ++i) p = bad.find('\n', p) + 1;
    bad.insert(bad.find(' ', p) + 1, "x");
    write_file_atomic(dir.path / "bad.tiktoken", bad);
    std::string msg = error_of((dir.path / "bad.tiktoken").string());
    EXPECT_NE(msg.find("bad.tiktoken:3: invalid rank"), std::string::npos) << msg;
    // Invalid base64 on line 1.
    write_file_atomic(dir.path / "b64.tiktoken", "@@== 0\n" + good);
    msg = error_of((dir.path / "b64.tiktoken").string());
    EXPECT_NE(msg.find("b64.tiktoken:1: invalid base64"), std::string::npos) << msg;
    // Truncated: the single byte tokens are there but a byte is missing -> named.
    std::size_t end = 0;
    for (int i = 0; i < 100; ++i) end = good.find('\n', end) + 1;
    write_file_atomic(dir.path / "short.tiktoken",
                      good.substr(good.find('\n') + 1, end - good.find('\n') - 1));  // lines 2-100
    msg = error_of((dir.path / "short.tiktoken").string());
    EXPECT_NE(msg.find("short.tiktoken: no token for the single byte 0x00"), std::string::npos) << msg;
    // Duplicate rank.
    write_file_atomic(dir.path / "dup.tiktoken", good + "YWJjZGVmZ2g= 5\n");
    msg = error_of((dir.path / "dup.tiktoken").string());
    EXPECT_NE(msg.find("token id 5 appears twice"), std::string::npos) << msg;
    write_file_atomic(dir.path / "huge.tiktoken", good + "YWJjZGVmZ2g= 999999999\n");
    msg = error_of((dir.path / "huge.tiktoken").string());
    EXPECT_NE(msg.find("is too large (at most 16777215)"), std::string::npos) << msg;
    write_file_atomic(dir.path / "empty.tiktoken", "\n");
    msg = error_of((dir.path / "empty.tiktoken").string());
    EXPECT_NE(msg.find("no tokens"), std::string::npos) << msg;
}

TEST(TokenizerLoad, Gpt2NameResolvesThroughLlmtrainHomeAndChecksSha) {
    TempDir home;
    fs::create_directories(home.path / "tokenizers");
    const std::string old = std::getenv("LLMTRAIN_HOME") ? std::getenv("LLMTRAIN_HOME") : "";
    ::setenv("LLMTRAIN_HOME", home.path.c_str(), 1);
    // Nothing in LLMTRAIN_HOME: either found further down the search list, or the error lists the home.
    const std::string msg = error_of("gpt2");
    if (msg != "(no error)") {
        EXPECT_NE(msg.find((home.path / "tokenizers" / "gpt2.tiktoken").string()), std::string::npos) << msg;
        EXPECT_NE(msg.find("scripts/setup.sh"), std::string::npos) << msg;
    }
    // A different file with the right name is refused by its sha256.
    std::string good = read_file(kGpt2File);
    write_file_atomic(home.path / "tokenizers" / "gpt2.tiktoken", good + "\n");
    const std::string bad = error_of("gpt2");
    EXPECT_NE(bad.find("sha256"), std::string::npos) << bad;
    write_file_atomic(home.path / "tokenizers" / "gpt2.tiktoken", good);
    const Tokenizer tok = Tokenizer::load("gpt2");
    EXPECT_EQ(tok.source_path(), (home.path / "tokenizers" / "gpt2.tiktoken").string());
    EXPECT_EQ(tok.encode_ordinary("Hello world"), (std::vector<uint32_t>{15496, 995}));
    if (old.empty())
        ::unsetenv("LLMTRAIN_HOME");
    else
        ::setenv("LLMTRAIN_HOME", old.c_str(), 1);
}

}  // namespace
}  // namespace llmt::data
