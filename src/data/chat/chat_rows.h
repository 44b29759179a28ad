// Chat examples laid out in rows of at most T (input, target) slots (docs/formats/chat_jsonl.md,
// "Rows"). An example of n tokens fills n-1 slots: inputs tokens[0..n-2], targets tokens[1..n-1], target i
// kept only when token i+1 is the assistant's (else -1), positions 0..n-2. One longer than T+1 tokens is
// truncated to its first T+1 (counted); one left without a target by that is dropped (counted).
//  - packing false: one example a row.
//  - packing true: Best-Fit Decreasing, as Hugging Face TRL's pack_dataset (strategy "bfd"): examples by
//    length, longest first (ties: input order), each into the row with the least free space that holds
//    it (ties: the row opened first), a new row when none does. Rows keep the order they were opened in.
// Every unused slot of a row (its tail; in a batch, up to the batch's T) holds the pad id, target -1, and
// positions that restart at 0 where the tail starts, so a tail is a segment of its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "data/chat/chat_dataset.h"

namespace llmt::data {

struct ChatPiece {
    uint32_t example = 0;
    uint32_t slots = 0;  // min(n-1, T)
};

struct ChatRowStats {
    std::size_t examples = 0;   // examples given
    std::size_t truncated = 0;  // longer than T+1 tokens, cut to T+1
    std::size_t dropped = 0;    // of those, left without a target and dropped
    std::size_t rows = 0;
    std::size_t slots = 0;      // used slots over all rows
    std::size_t targets = 0;    // targets >= 0 over all rows

    // "1200 examples in 400 rows of T=128 (92.1% of slots used), 3 truncated to 129 tokens (1 dropped: no target
    // left)".
    std::string summary(int T) const;
};

// Thread safety: const methods may be called concurrently.
class ChatRows {
public:
    // Plans rows over `examples` (indices into ds). Throws InternalError for T < 1.
    ChatRows(const ChatDataset& ds, std::span<const uint32_t> examples, int T, bool packing);

    std::size_t size() const { return row_begin_.size() - 1; }
    std::span<const ChatPiece> pieces(std::size_t row) const {
        return {pieces_.data() + row_begin_[row], static_cast<std::size_t>(row_begin_[row + 1] - row_begin_[row])};
    }
    uint32_t slots(std::size_t row) const { return row_slots_[row]; }
    uint32_t targets(std::size_t row) const { return row_targets_[row]; }
    const ChatRowStats& stats() const { return stats_; }

    // Writes row `row` into T_row slots (T_row >= slots(row)): inputs, targets and positions, int32 each.
    void fill(const ChatDataset& ds, std::size_t row, int T_row, uint32_t pad_id, int32_t* inputs, int32_t* targets,
              int32_t* positions) const;

private:
    std::vector<uint64_t> row_begin_{0};
    std::vector<ChatPiece> pieces_;
    std::vector<uint32_t> row_slots_, row_targets_;
    ChatRowStats stats_;
};

// Best-Fit Decreasing of `lengths` (each in [1, capacity]) into bins of `capacity`: the bins, each a list
// of indices into lengths, in the order they were opened (exposed for tests).
std::vector<std::vector<uint32_t>> best_fit_decreasing(std::span<const uint32_t> lengths, uint32_t capacity);

}  // namespace llmt::data
