// Packed rows for the attention and RoPE tests: Hugging Face position_ids for rows that hold examples one
// after another (positions count up from 0 in each example), and the examples' spans to cut them out again.
#pragma once

#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace llmt::kernels::test {

struct Span {
    int b, start, len;  // batch row, first time step, length
};

struct Packing {
    int B = 0, T = 0;
    std::vector<int32_t> positions;  // (B,T)
    std::vector<Span> spans;         // every example, row by row
};

// lengths[b]: the example lengths of row b, which must add up to T.
inline Packing pack_rows(const std::vector<std::vector<int>>& lengths, int T) {
    Packing p;
    p.B = static_cast<int>(lengths.size());
    p.T = T;
    p.positions.resize(static_cast<size_t>(p.B) * T);
    for (int b = 0; b < p.B; b++) {
        if (std::accumulate(lengths[b].begin(), lengths[b].end(), 0) != T)
            throw std::invalid_argument("pack_rows: the lengths of row " + std::to_string(b) + " do not add up to T");
        int t = 0;
        for (int len : lengths[b]) {
            p.spans.push_back({b, t, len});
            for (int i = 0; i < len; i++) p.positions[static_cast<size_t>(b) * T + t + i] = i;
            t += len;
        }
    }
    return p;
}

// Rows start..start+len-1 of batch row b of a (B,T,W) buffer, as a (1,len,W) buffer.
template <typename X>
std::vector<X> cut_rows(const std::vector<X>& x, int T, int W, const Span& s) {
    const auto* first = x.data() + (static_cast<size_t>(s.b) * T + s.start) * W;
    return std::vector<X>(first, first + static_cast<size_t>(s.len) * W);
}

}  // namespace llmt::kernels::test
