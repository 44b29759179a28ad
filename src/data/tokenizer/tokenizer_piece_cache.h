// The encoder's first stop for a pre-token (piece): a cache of recent pieces -> their ids, owned by one
// encoding thread (no locks), two-way set associative with the bytes and ids inline. Pieces follow Zipf's
// law (on the reference corpus the 4,096 most frequent of Llama 3's 58K distinct pieces are 90% of all
// pieces), so a hit, one cache line, replaces the lookups that miss the CPU cache on every piece
// otherwise: the vocabulary's hash table (4 MB for Llama 3), then the word cache (tokenizer_word_cache.h)
// or the merge loop's pair table (several MB). Only pieces of 2..16 bytes (99.9% of pieces of more than
// one byte) that encode to 1..3 ids are kept. 1 MB a thread, the L2 cache of a build-machine core: there
// (2-core EPYC, Llama 3 on the reference corpus) 512 KB encoded ~7% slower and 2 MB ~10% faster, in
// noisy runs; one-way (direct-mapped) tables of the same size were slower than two-way ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace llmt::data {

// A piece of at most 16 bytes as two little-endian words, zero-padded, and its length.
struct PieceKey {
    static constexpr std::size_t kMaxBytes = 16;
    uint64_t lo = 0, hi = 0;
    uint32_t len = 0;

    // The piece [begin + pos, begin + pos + len) of a text of `size` bytes (2 <= len <= kMaxBytes); reads
    // whole words where the text has them, so no byte outside the text is touched.
    static PieceKey of(const unsigned char* begin, std::size_t size, std::size_t pos, std::size_t len) {
        PieceKey k;
        k.len = static_cast<uint32_t>(len);
        const unsigned char* p = begin + pos;
        if (len <= 8) {
            k.lo = load_partial(p, len, begin, size - pos);
        } else {
            std::memcpy(&k.lo, p, 8);
            k.hi = load_partial(p + 8, len - 8, begin, size - pos - 8);
        }
        return k;
    }
    uint64_t hash() const {
        uint64_t h = (lo ^ (hi * 0x9E3779B97F4A7C15ull) ^ len) * 0xbf58476d1ce4e5b9ull;
        return h ^ (h >> 31);
    }
    bool operator==(const PieceKey& o) const { return lo == o.lo && hi == o.hi && len == o.len; }

private:
    // n (1..8) bytes at p as a zero-padded little-endian word; `avail` bytes are readable from p and the
    // text starts at `begin`.
    static uint64_t load_partial(const unsigned char* p, std::size_t n, const unsigned char* begin,
                                 std::size_t avail) {
        uint64_t w = 0;
        if (avail >= 8) {
            std::memcpy(&w, p, 8);
        } else if (p + n - begin >= 8) {
            std::memcpy(&w, p + n - 8, 8);  // the 8 bytes ending with the piece's last one
            w >>= 8 * (8 - n);
            return w;
        } else {
            for (std::size_t i = 0; i < n; ++i) w |= uint64_t{p[i]} << (8 * i);
            return w;
        }
        return n == 8 ? w : w & ((uint64_t{1} << (8 * n)) - 1);
    }
};

class PieceCache {
public:
    static constexpr std::size_t kMaxIds = 3;
    static constexpr int kSetBits = 14;
    static constexpr std::size_t kSets = std::size_t{1} << kSetBits;  // of 2 entries: 32,768 pieces, 1 MB

    // Empties the cache and ties it to the tokenizer instance `owner` (TokenizerImpl::serial).
    void reset(uint64_t owner) {
        owner_ = owner;
        sets_.assign(kSets, Set{});
    }
    uint64_t owner() const { return owner_; }
    // The set a piece of hash h (PieceKey::hash) belongs to.
    static std::size_t set_of(uint64_t h) { return static_cast<std::size_t>(h >> (64 - kSetBits)); }

    // Appends the ids of `key` (h = key.hash()) to `out` and returns true when the cache holds it; a hit
    // makes it the most recently used of its set.
    bool lookup(const PieceKey& key, uint64_t h, std::vector<uint32_t>& out) {
        Set& set = sets_[set_of(h)];
        if (!set.way[0].holds(key)) {
            if (!set.way[1].holds(key)) return false;
            std::swap(set.way[0], set.way[1]);  // the most recently used first
        }
        const Entry& e = set.way[0];
        for (uint8_t i = 0; i < e.count; ++i) out.push_back(e.ids[i]);
        return true;
    }
    // Remembers that `key` encodes to ids[0, n) as the most recently used of its set, dropping the least
    // recently used; ignored when n is 0 or more than kMaxIds.
    void insert(const PieceKey& key, uint64_t h, const uint32_t* ids, std::size_t n) {
        if (n == 0 || n > kMaxIds) return;
        Set& set = sets_[set_of(h)];
        set.way[1] = set.way[0];
        Entry& e = set.way[0];
        e.lo = key.lo;
        e.hi = key.hi;
        e.len = static_cast<uint8_t>(key.len);
        e.count = static_cast<uint8_t>(n);
        std::memcpy(e.ids, ids, n * sizeof(uint32_t));
    }

private:
    struct Entry {
        uint64_t lo = 0, hi = 0;
        uint32_t ids[kMaxIds] = {};
        uint8_t len = 0;  // 0: empty (a cached piece has at least 2 bytes)
        uint8_t count = 0;
        bool holds(const PieceKey& k) const { return lo == k.lo && hi == k.hi && len == k.len; }
    };
    struct alignas(64) Set {
        Entry way[2];
    };
    static_assert(sizeof(Set) == 64, "a set is one cache line");

    uint64_t owner_ = 0;
    std::vector<Set> sets_;
};

}  // namespace llmt::data
