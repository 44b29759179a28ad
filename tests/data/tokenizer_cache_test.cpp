// The encoder's per-thread caches give the ids the merge loop gives without them. Unit tests of each
// cache (tokenizer_piece_cache.h: a key holds exactly the piece's bytes wherever the piece sits in the
// text; a set keeps its two most recently used pieces; tokenizer_word_cache.h: emptied when full), then
// whole texts through Tokenizer::encode_ordinary against encode_piece_uncached (tokenizer_bpe.h) piece by
// piece, for GPT-2 and Llama 3: pieces repeated many times, more distinct pieces than both caches hold
// (so entries are replaced and the word cache is emptied), pieces longer than the caches' key limits
// (16 and 64 bytes) and than the short merge loop's 48, pieces of more ids than the piece cache keeps,
// and two tokenizers taking turns on one thread.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "data/tokenizer/tokenizer.h"
#include "data/tokenizer/tokenizer_bpe.h"
#include "data/tokenizer/tokenizer_piece_cache.h"
#include "data/tokenizer/tokenizer_pretokenize.h"
#include "data/tokenizer/tokenizer_vocab.h"
#include "data/tokenizer/tokenizer_word_cache.h"

namespace llmt::data {
namespace {

PieceKey key_bytewise(const unsigned char* p, std::size_t n) {
    PieceKey k;
    k.len = static_cast<uint32_t>(n);
    for (std::size_t i = 0; i < n; ++i) (i < 8 ? k.lo : k.hi) |= uint64_t{p[i]} << (8 * (i % 8));
    return k;
}

PieceKey key_of(const std::string& s) {
    return PieceKey::of(reinterpret_cast<const unsigned char*>(s.data()), s.size(), 0, s.size());
}

TEST(PieceKey, HoldsExactlyThePieceWhereverItSits) {
    std::mt19937_64 rng(7);
    for (std::size_t size = 2; size <= 40; ++size) {
        // A buffer of exactly `size` bytes (no slack to read into unnoticed under a sanitizer); bytes
        // 0x00 and 0xFF are common so that masking mistakes show.
        std::vector<unsigned char> text(size);
        for (auto& c : text) c = static_cast<unsigned char>(rng() % 3 == 0 ? 0 : rng() % 2 ? 0xFF : rng());
        for (std::size_t pos = 0; pos + 2 <= size; ++pos) {
            for (std::size_t n = 2; n <= PieceKey::kMaxBytes && pos + n <= size; ++n) {
                const PieceKey got = PieceKey::of(text.data(), size, pos, n);
                const PieceKey want = key_bytewise(text.data() + pos, n);
                ASSERT_TRUE(got == want) << "text size " << size << ", piece at " << pos << " of " << n << " bytes";
            }
        }
    }
    // A trailing zero byte is part of the piece: "ab" and "ab\0" are different keys.
    EXPECT_FALSE(key_of("ab") == key_of(std::string("ab\0", 3)));
}

// `count` distinct keys of 2..16 bytes that fall into the same set of the piece cache.
std::vector<PieceKey> keys_of_one_set(std::size_t count) {
    std::vector<PieceKey> keys;
    std::size_t set = 0;
    for (uint64_t i = 0; keys.size() < count; ++i) {
        const PieceKey k = key_of("k" + std::to_string(i));
        if (keys.empty()) set = PieceCache::set_of(k.hash());
        if (PieceCache::set_of(k.hash()) == set) keys.push_back(k);
    }
    return keys;
}

std::vector<uint32_t> lookup(PieceCache& cache, const PieceKey& k) {
    std::vector<uint32_t> out = {99};  // lookup appends
    if (!cache.lookup(k, k.hash(), out)) return {};
    return {out.begin() + 1, out.end()};
}

TEST(PieceCache, KeepsTheTwoMostRecentlyUsedPiecesOfASet) {
    const auto k = keys_of_one_set(4);
    PieceCache cache;
    cache.reset(1);
    const uint32_t a[] = {10}, b[] = {20, 21}, c[] = {30, 31, 32}, d[] = {40, 41, 42, 43};
    EXPECT_TRUE(lookup(cache, k[0]).empty());
    cache.insert(k[0], k[0].hash(), a, 1);
    cache.insert(k[1], k[1].hash(), b, 2);
    EXPECT_EQ(lookup(cache, k[1]), std::vector<uint32_t>({20, 21}));
    EXPECT_EQ(lookup(cache, k[0]), std::vector<uint32_t>({10}));  // now the most recently used
    cache.insert(k[2], k[2].hash(), c, 3);                        // replaces k[1], the least recently used
    EXPECT_TRUE(lookup(cache, k[1]).empty());
    EXPECT_EQ(lookup(cache, k[0]), std::vector<uint32_t>({10}));
    EXPECT_EQ(lookup(cache, k[2]), std::vector<uint32_t>({30, 31, 32}));
    // More ids than an entry holds, or none: not kept, and nothing else is replaced.
    cache.insert(k[3], k[3].hash(), d, 4);
    cache.insert(k[3], k[3].hash(), d, 0);
    EXPECT_TRUE(lookup(cache, k[3]).empty());
    EXPECT_EQ(lookup(cache, k[0]), std::vector<uint32_t>({10}));
    EXPECT_EQ(lookup(cache, k[2]), std::vector<uint32_t>({30, 31, 32}));
    cache.reset(2);
    EXPECT_TRUE(lookup(cache, k[0]).empty());
    EXPECT_EQ(cache.owner(), 2u);
}

// Keys that differ only in bytes 9..16, or only in length (a trailing zero byte), given the same hash
// (so the same set): the cache must tell them apart.
TEST(PieceCache, TellsApartKeysThatShareASet) {
    const std::pair<std::string, std::string> pairs[] = {{"abcdefgh12345", "abcdefgh12346"},
                                                         {"abc", std::string("abc\0", 4)},
                                                         {"abcdefghij", std::string("abcdefghij\0\0", 12)}};
    for (const auto& [first, second] : pairs) {
        const PieceKey a = key_of(first), b = key_of(second);
        const uint64_t h = a.hash();
        PieceCache cache;
        cache.reset(1);
        const uint32_t ids[] = {1};
        cache.insert(a, h, ids, 1);
        std::vector<uint32_t> out;
        EXPECT_FALSE(cache.lookup(b, h, out)) << second.size() << " bytes";
        EXPECT_TRUE(cache.lookup(a, h, out)) << first;
    }
}

TEST(WordCache, EmptiedWhenFull) {
    WordCache cache;
    cache.reset(1);
    auto word = [](std::size_t i) { return "word" + std::to_string(i); };
    for (std::size_t i = 0; i < WordCache::kMaxWords; ++i) {
        const std::string w = word(i);
        const uint32_t ids[] = {static_cast<uint32_t>(i), 7, 8, 9};
        cache.insert(w, hash_bytes(w), ids, 1 + i % 4);
    }
    for (std::size_t i : {std::size_t{0}, std::size_t{1}, WordCache::kMaxWords - 1}) {
        std::vector<uint32_t> out;
        ASSERT_TRUE(cache.lookup(word(i), hash_bytes(word(i)), out)) << word(i);
        const std::vector<uint32_t> want = {static_cast<uint32_t>(i), 7, 8, 9};
        EXPECT_EQ(out, std::vector<uint32_t>(want.begin(), want.begin() + 1 + i % 4)) << word(i);
    }
    const std::string extra = "one more";
    const uint32_t extra_ids[] = {5, 6};
    cache.insert(extra, hash_bytes(extra), extra_ids, 2);
    std::vector<uint32_t> out;
    EXPECT_FALSE(cache.lookup(word(0), hash_bytes(word(0)), out));
    EXPECT_FALSE(cache.lookup(word(WordCache::kMaxWords - 1), hash_bytes(word(WordCache::kMaxWords - 1)), out));
    ASSERT_TRUE(cache.lookup(extra, hash_bytes(extra), out));
    EXPECT_EQ(out, std::vector<uint32_t>({5, 6}));
}

struct Loaded {
    std::shared_ptr<const TokenizerImpl> impl;
    Tokenizer tok;
};

Loaded load(RankList list) {
    auto impl = std::make_shared<const TokenizerImpl>(TokenizerImpl::build(std::move(list)));
    return {impl, Tokenizer(impl)};
}

// The ids of `text`, piece by piece with no cache.
std::vector<uint32_t> encode_uncached(const TokenizerImpl& v, std::string_view text) {
    const auto pieces = v.pretokenizer == Pretokenizer::kLlama3 ? llama3_pretokenize(text) : gpt2_pretokenize(text);
    std::vector<uint32_t> out;
    for (std::string_view p : pieces) encode_piece_uncached(v, p, out);
    return out;
}

std::string random_word(std::mt19937_64& rng, std::size_t min_len, std::size_t max_len) {
    static const std::string letters = "abcdefghijklmnopqrstuvwxyzQXZ";
    std::string w;
    const std::size_t n = min_len + rng() % (max_len - min_len + 1);
    for (std::size_t i = 0; i < n; ++i) w.push_back(letters[rng() % letters.size()]);
    return w;
}

// A text that meets every branch of the caches (see the file comment).
std::string cache_workout_text() {
    std::mt19937_64 rng(19);
    std::string text;
    const std::string common = "In the beginning God created the heaven and the earth. And it was so; it's true!\n";
    for (int i = 0; i < 50; ++i) text += common;
    // 80,000 distinct words, most of several ids: more than the piece cache's 16,384 entries and the
    // word cache's 65,536 words, so both replace and empty; interleaved with the common text, whose pieces
    // must survive or come back right.
    for (int i = 0; i < 80000; ++i) {
        text += " " + random_word(rng, 2, 16) + std::to_string(i % 1000);
        if (i % 5000 == 0) text += common;
    }
    // Pieces around the limits: 16/17 bytes (piece cache), 48/49 (short merge loop), 64/65 (word cache),
    // long ones; letters, spaces, punctuation; each twice so that the second meets the caches.
    for (std::size_t n : {15, 16, 17, 47, 48, 49, 63, 64, 65, 300}) {
        for (int twice = 0; twice < 2; ++twice) {
            text += " " + std::string(n, 'a') + " x" + std::string(n, ' ') + "y " + std::string(n, '!') + " ";
            text += random_word(rng, n, n) + " ";
        }
    }
    // Multi-byte UTF-8 letters and invalid bytes.
    for (int i = 0; i < 200; ++i) text += " \xC3\xA9t\xC3\xA9 \xE6\x9D\xB1\xE4\xBA\xAC \xFF\x80 caf\xC3\xA9";
    text += common;
    return text;
}

TEST(TokenizerCaches, SameIdsAsTheUncachedMergeLoop) {
    const Loaded gpt2 = load(load_tiktoken_file(LLMT_SHARED_DIR "/data/gpt2.tiktoken"));
    const Loaded llama3 = load(load_hf_tokenizer_json(LLMT_SOURCE_DIR "/data/tokenizers/llama3/tokenizer.json"));
    const std::string text = cache_workout_text();
    const auto want_gpt2 = encode_uncached(*gpt2.impl, text);
    const auto want_llama3 = encode_uncached(*llama3.impl, text);
    // Cold caches, then warm ones, with the tokenizers taking turns on this thread (each turn finds the
    // other's caches and must start over).
    for (int round = 0; round < 2; ++round) {
        EXPECT_EQ(gpt2.tok.encode_ordinary(text), want_gpt2) << "GPT-2, round " << round;
        EXPECT_EQ(gpt2.tok.encode_ordinary(text), want_gpt2) << "GPT-2 again, round " << round;
        EXPECT_EQ(llama3.tok.encode_ordinary(text), want_llama3) << "Llama 3, round " << round;
        EXPECT_EQ(llama3.tok.encode_ordinary(text), want_llama3) << "Llama 3 again, round " << round;
    }
    // The piece cache must have seen pieces of more ids than it keeps (else the test misses that branch).
    std::size_t over = 0;
    for (std::string_view p : llama3_pretokenize(text)) {
        std::vector<uint32_t> ids;
        encode_piece_uncached(*llama3.impl, p, ids);
        over += p.size() <= PieceKey::kMaxBytes && ids.size() > PieceCache::kMaxIds;
    }
    EXPECT_GT(over, 1000u);
}

}  // namespace
}  // namespace llmt::data
