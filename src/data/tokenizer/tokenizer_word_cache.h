// The encoder's second cache, behind the piece cache (tokenizer_piece_cache.h): pieces of up to 64 bytes
// that are not themselves tokens -> the ids the merge loop gave them, any number of ids. Owned by one
// encoding thread (no locks), tied to one TokenizerImpl by its serial; emptied when it holds 64K words,
// which keeps it simple and bounded (~4 MB a thread). The KJV + fortunes corpus has ~30K distinct
// multi-token words.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer/tokenizer_vocab.h"

namespace llmt::data {

class WordCache {
public:
    static constexpr std::size_t kMaxWordBytes = 64;  // callers keep longer words out
    static constexpr std::size_t kMaxWords = std::size_t{1} << 16;

    // Empties the cache and ties it to the tokenizer instance `owner` (TokenizerImpl::serial).
    void reset(uint64_t owner) {
        owner_ = owner;
        clear();
    }
    uint64_t owner() const { return owner_; }

    // Appends the cached ids of `word` (h = hash_bytes(word)) to `out`; false when absent.
    bool lookup(std::string_view word, uint64_t h, std::vector<uint32_t>& out) const {
        if (slots_.empty()) return false;
        for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
            const Slot& s = slots_[i];
            if (s.key_len == kEmpty) return false;
            if (s.hash == static_cast<uint32_t>(h >> 32) && s.key_len == word.size() &&
                bytes_equal(keys_.data() + s.key_off, word.data(), word.size())) {
                out.insert(out.end(), vals_.begin() + s.val_off, vals_.begin() + s.val_off + s.val_len);
                return true;
            }
        }
    }
    // Remembers that `word` (absent: callers insert after a failed lookup) encodes to ids[0, n); first
    // empties the cache when it holds kMaxWords words.
    void insert(std::string_view word, uint64_t h, const uint32_t* ids, std::size_t n) {
        if (slots_.empty()) {
            slots_.assign(kSlots, Slot{});
            mask_ = kSlots - 1;
        }
        if (count_ >= kMaxWords) clear();
        std::size_t i = h & mask_;
        while (slots_[i].key_len != kEmpty) i = (i + 1) & mask_;
        slots_[i] = Slot{static_cast<uint32_t>(h >> 32), static_cast<uint32_t>(keys_.size()),
                         static_cast<uint32_t>(word.size()), static_cast<uint32_t>(vals_.size()),
                         static_cast<uint32_t>(n)};
        keys_.append(word);
        vals_.insert(vals_.end(), ids, ids + n);
        ++count_;
    }

private:
    static constexpr std::size_t kSlots = 2 * kMaxWords;  // load factor at most 1/2
    static constexpr uint32_t kEmpty = 0xFFFFFFFFu;
    struct Slot {
        uint32_t hash = 0, key_off = 0, key_len = kEmpty, val_off = 0, val_len = 0;
    };
    void clear() {
        if (!slots_.empty()) std::fill(slots_.begin(), slots_.end(), Slot{});
        keys_.clear();
        vals_.clear();
        count_ = 0;
    }
    uint64_t owner_ = 0;
    std::vector<Slot> slots_;
    std::size_t mask_ = 0, count_ = 0;
    std::string keys_;
    std::vector<uint32_t> vals_;
};

}  // namespace llmt::data
