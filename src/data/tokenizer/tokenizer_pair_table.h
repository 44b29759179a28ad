// The merge loop's lookup: (left token id, right token id) -> merge rank, open addressing with linear
// probing. A slot holds both ids and the rank (12 bytes), so a lookup reads one slot, most often from one
// cache line; a miss of the CPU cache per lookup is what the merge loop's time goes to, since Llama 3's
// 280,147 merges make a table of several MB.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace llmt::data {

class PairTable {
public:
    static constexpr uint32_t kNone = 0xFFFFFFFFu;

    // Room for `pairs` pairs at a load factor of at most 1/2.
    void reserve(std::size_t pairs) {
        int bits = 4;
        while ((std::size_t{1} << bits) < 2 * pairs) ++bits;
        slots_.assign(std::size_t{1} << bits, Slot{});
        mask_ = slots_.size() - 1;
        shift_ = 64 - bits;
    }
    // Adds (a, b) -> rank, or returns the rank already stored for (a, b) and changes nothing.
    // a and b are token ids (never kNone); reserve() must have made room.
    uint32_t insert(uint32_t a, uint32_t b, uint32_t rank) {
        for (std::size_t i = start(a, b);; i = (i + 1) & mask_) {
            Slot& s = slots_[i];
            if (s.a == kNone) {
                s = Slot{a, b, rank};
                return rank;
            }
            if (s.a == a && s.b == b) return s.rank;
        }
    }
    // The rank of merging a with b; kNone when they do not merge.
    uint32_t find(uint32_t a, uint32_t b) const {
        for (std::size_t i = start(a, b);; i = (i + 1) & mask_) {
            const Slot& s = slots_[i];
            if (s.a == a && s.b == b) return s.rank;
            if (s.a == kNone) return kNone;
        }
    }

private:
    struct Slot {
        uint32_t a = kNone, b = kNone, rank = kNone;
    };
    std::size_t start(uint32_t a, uint32_t b) const {
        // Fibonacci hashing: the top bits of the product depend on every bit of both ids.
        return static_cast<std::size_t>((((uint64_t{a} << 32) | b) * 0x9E3779B97F4A7C15ull) >> shift_);
    }

    std::vector<Slot> slots_;
    std::size_t mask_ = 0;
    int shift_ = 64;
};

}  // namespace llmt::data
