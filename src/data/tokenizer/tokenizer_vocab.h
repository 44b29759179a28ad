// Internal to the tokenizer: the loaded vocabulary (token bytes <-> ids), the pair table the merge loop
// uses, and the loaders for the file formats. Not part of the public API (tokenizer.h).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "data/tokenizer/tokenizer_pair_table.h"

namespace llmt::data {

inline uint64_t hash_bytes(const unsigned char* p, std::size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t w;
        std::memcpy(&w, p, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
        p += 8;
        n -= 8;
    }
    if (n > 0) {
        uint64_t w = 0;
        std::memcpy(&w, p, n);
        h = (h ^ w) * 0x94d049bb133111ebull;
    }
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
}
// memcmp(a, b, n) == 0 for the short strings tokens are, without a libc call.
inline bool bytes_equal(const void* a, const void* b, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(a);
    const auto* q = static_cast<const unsigned char*>(b);
    while (n >= 8) {
        uint64_t x, y;
        std::memcpy(&x, p, 8);
        std::memcpy(&y, q, 8);
        if (x != y) return false;
        p += 8;
        q += 8;
        n -= 8;
    }
    for (std::size_t i = 0; i < n; ++i)
        if (p[i] != q[i]) return false;
    return true;
}
inline uint64_t hash_bytes(std::string_view s) {
    return hash_bytes(reinterpret_cast<const unsigned char*>(s.data()), s.size());
}

constexpr uint32_t kNoToken = 0xFFFFFFFFu;

// Which hand-written pre-tokenizer splits ordinary text (tokenizer_pretokenize.h).
enum class Pretokenizer : uint8_t { kGpt2, kLlama3 };

// A token matched in the text before pre-tokenization (Hugging Face's added_tokens; tiktoken's specials).
// `special` ones are matched only when special tokens are allowed; the others always.
struct AddedToken {
    std::string text;
    uint32_t id = 0;
    bool special = true;
};

// What a loader produces. tiktoken semantics (merges empty): mergeable tokens with their ranks (= ids);
// a pair merges when its concatenation is a token, lowest rank first. Hugging Face semantics (merges
// given): `ranks` is the vocabulary (bytes, id) and `merges` the merge list as byte strings, whose index
// is the priority; only listed pairs merge.
struct RankList {
    std::vector<std::pair<std::string, uint32_t>> ranks;
    std::vector<AddedToken> specials;
    std::vector<std::pair<std::string, std::string>> merges;
    bool whole_word_first = true;  // a piece that is itself a token is that token (HF: ignore_merges)
    Pretokenizer pretokenizer = Pretokenizer::kGpt2;
    std::string eot_text = "<|endoftext|>";  // the added token that ends (separates) documents
    // Added tokens Hugging Face's post-processor puts around one sequence (add_special_tokens=True).
    std::vector<uint32_t> prefix, suffix;
    std::string source_path;
    std::string source_sha256;
};

// Immutable after build(); shared by all copies of a Tokenizer.
struct TokenizerImpl {
    // Token bytes by id: arena_[off_[id], off_[id] + len_[id]); ids that are gaps have kind 0.
    std::string arena;
    std::vector<uint32_t> off, len;
    std::vector<uint8_t> kind;  // 0 = absent, 1 = mergeable, 2 = special
    // bytes -> id over mergeable tokens, open addressing. A slot carries the token's first 8 bytes, length
    // and a hash tag, so that most lookups (GPT-2 tokens average ~6 bytes) touch one slot and nothing else.
    struct TokenSlot {
        uint64_t head = 0;  // first min(8, len) bytes, zero-padded
        uint32_t id = kNoToken;
        uint16_t len = 0;
        uint16_t tag = 0;
    };
    std::vector<TokenSlot> token_slots;
    uint64_t token_mask = 0;
    // (left id, right id) -> merge rank (tiktoken: the id of their concatenation, when that is a
    // mergeable token; Hugging Face: the index of the pair in the merge list); rank_id[rank] is the id the
    // merge produces (the identity for tiktoken). One slot per pair (tokenizer_pair_table.h).
    PairTable pairs;
    std::vector<uint32_t> rank_id;
    uint32_t byte_id[256] = {};
    bool whole_word_first = true;
    Pretokenizer pretokenizer = Pretokenizer::kGpt2;
    std::vector<std::pair<std::string, uint32_t>> specials;  // every added token, in file order
    // Added tokens longest first (leftmost-longest matching, as Hugging Face's AddedVocabulary does).
    std::vector<AddedToken> added_by_length;
    bool added_first_byte[256] = {};  // bytes an added token can start with
    bool any_non_special = false;
    uint32_t eot = kNoToken;
    std::vector<uint32_t> prefix, suffix;
    std::size_t vocab_size = 0;
    uint64_t serial = 0;  // distinguishes instances for the per-thread caches (piece and word caches)
    std::string source_path, source_sha256;

    std::string_view bytes_of(uint32_t id) const { return {arena.data() + off[id], len[id]}; }

    static uint64_t head_of(const unsigned char* p, std::size_t n) {
        uint64_t w = 0;
        if (n >= 8) {
            std::memcpy(&w, p, 8);
        } else {
            for (std::size_t i = 0; i < n; ++i) w |= uint64_t{p[i]} << (8 * i);
        }
        return w;
    }
    static uint16_t tag_of(uint64_t h) { return static_cast<uint16_t>(h >> 48); }

    uint32_t find_token(const unsigned char* p, std::size_t n, uint64_t h) const {
        const uint64_t head = head_of(p, n);
        const uint16_t tag = tag_of(h);
        for (uint64_t i = h & token_mask;; i = (i + 1) & token_mask) {
            const TokenSlot& slot = token_slots[i];
            if (slot.id == kNoToken) return kNoToken;
            if (slot.tag == tag && slot.len == n && slot.head == head &&
                (n <= 8 || bytes_equal(arena.data() + off[slot.id] + 8, p + 8, n - 8)))
                return slot.id;
        }
    }
    uint32_t find_pair(uint32_t a, uint32_t b) const { return pairs.find(a, b); }

    // Validates the list (unique ranks and bytes, all 256 single bytes present, merges of known tokens,
    // the eot token among the added ones) and builds the tables. Throws FormatError naming
    // `list.source_path`.
    static TokenizerImpl build(RankList list);
};

// Loaders (tokenizer_load.cpp, tokenizer_hf_json.cpp). Each throws FormatError naming the file and
// line / key.
RankList load_tiktoken_file(const std::string& path);
RankList load_hf_tokenizer_json(const std::string& path);
RankList load_vocab_merges(const std::string& vocab_path, const std::string& merges_path);
// tokenizer.json with a Split (regex) pre-tokenizer, the Llama 3 layout (tokenizer_hf_json.cpp).
// `j` is the parsed file, `sha256` the hash of its bytes.
RankList load_hf_split_tokenizer_json(const std::string& path, const nlohmann::json& j, const std::string& sha256);

// GPT-2's byte-to-unicode alphabet: decodes a byte-level token string to its bytes; false when a
// character is outside the alphabet (tokenizer_load.cpp).
bool decode_byte_level(std::string_view s, std::string& out);

}  // namespace llmt::data
