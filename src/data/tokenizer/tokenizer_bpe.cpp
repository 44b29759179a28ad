// The merge loop (tokenizer_bpe.h): a quadratic scan on the stack for short pieces, a heap for long ones.
#include "data/tokenizer/tokenizer_bpe.h"

#include <functional>
#include <queue>
#include <utility>

namespace llmt::data {
namespace {

// Short words: tiktoken's scan (find the lowest-ranked pair, merge, rescore its two neighbours).
// Quadratic in the word length but with tiny constants; used up to kShortWord bytes.
constexpr std::size_t kShortWord = 48;

void bpe_short(const TokenizerImpl& v, const unsigned char* p, std::size_t n, std::vector<uint32_t>& out) {
    uint32_t ids[kShortWord];
    uint32_t rank[kShortWord];  // rank[i]: rank of merging ids[i] with ids[i + 1]
    for (std::size_t i = 0; i < n; ++i) ids[i] = v.byte_id[p[i]];
    for (std::size_t i = 0; i + 1 < n; ++i) rank[i] = v.find_pair(ids[i], ids[i + 1]);
    std::size_t m = n;
    while (m > 1) {
        std::size_t best = 0;
        uint32_t best_rank = kNoToken;
        for (std::size_t i = 0; i + 1 < m; ++i) {
            if (rank[i] < best_rank) {
                best_rank = rank[i];
                best = i;
            }
        }
        if (best_rank == kNoToken) break;
        ids[best] = v.rank_id[best_rank];
        for (std::size_t i = best + 1; i + 1 < m; ++i) {
            ids[i] = ids[i + 1];
            rank[i] = rank[i + 1];
        }
        --m;
        if (best > 0) rank[best - 1] = v.find_pair(ids[best - 1], ids[best]);
        rank[best] = best + 1 < m ? v.find_pair(ids[best], ids[best + 1]) : kNoToken;
    }
    out.insert(out.end(), ids, ids + m);
}

// Long words (runs of spaces, long letter strings): a doubly linked list of parts and a min-heap of
// (rank, position) with lazy deletion, O(n log n). The heap order (rank, then position) picks the
// same pair as tiktoken's scan: the lowest rank, leftmost among equals. A heap entry is stale when its
// part is gone or the part's current pair rank differs (a part's pair only grows, so its rank changes).
void bpe_long(const TokenizerImpl& v, const unsigned char* p, std::size_t n, std::vector<uint32_t>& out) {
    std::vector<uint32_t> ids(n), rank(n), next(n), prev(n);
    using Entry = std::pair<uint32_t, uint32_t>;  // (rank, position)
    std::vector<Entry> heap_storage;
    heap_storage.reserve(n);
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap(std::greater<Entry>{},
                                                                          std::move(heap_storage));
    for (std::size_t i = 0; i < n; ++i) {
        ids[i] = v.byte_id[p[i]];
        next[i] = static_cast<uint32_t>(i + 1);
        prev[i] = static_cast<uint32_t>(i) - 1;  // wraps to kNoToken for i == 0
    }
    for (std::size_t i = 0; i + 1 < n; ++i) {
        rank[i] = v.find_pair(ids[i], ids[i + 1]);
        if (rank[i] != kNoToken) heap.emplace(rank[i], static_cast<uint32_t>(i));
    }
    rank[n - 1] = kNoToken;
    const uint32_t end = static_cast<uint32_t>(n);
    while (!heap.empty()) {
        const auto [r, i] = heap.top();
        heap.pop();
        if (ids[i] == kNoToken || rank[i] != r) continue;
        const uint32_t j = next[i];
        ids[i] = v.rank_id[r];
        ids[j] = kNoToken;
        next[i] = next[j];
        if (next[i] != end) prev[next[i]] = i;
        rank[i] = next[i] != end ? v.find_pair(ids[i], ids[next[i]]) : kNoToken;
        if (rank[i] != kNoToken) heap.emplace(rank[i], i);
        if (prev[i] != kNoToken) {
            const uint32_t h = prev[i];
            rank[h] = v.find_pair(ids[h], ids[i]);
            if (rank[h] != kNoToken) heap.emplace(rank[h], h);
        }
    }
    for (uint32_t i = 0; i != end; i = next[i]) out.push_back(ids[i]);
}

}  // namespace

void bpe_merge(const TokenizerImpl& v, const unsigned char* p, std::size_t n, std::vector<uint32_t>& out) {
    if (n <= kShortWord)
        bpe_short(v, p, n, out);
    else
        bpe_long(v, p, n, out);
}

void encode_piece_uncached(const TokenizerImpl& v, std::string_view piece, std::vector<uint32_t>& out) {
    const auto* p = reinterpret_cast<const unsigned char*>(piece.data());
    if (v.whole_word_first) {
        const uint32_t whole = v.find_token(p, piece.size(), hash_bytes(p, piece.size()));
        if (whole != kNoToken) {
            out.push_back(whole);
            return;
        }
    }
    bpe_merge(v, p, piece.size(), out);
}

}  // namespace llmt::data
