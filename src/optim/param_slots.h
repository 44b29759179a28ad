// The parameter tensors an optimizer updates inside the flat fp32 arena, and the part of them one
// optimizer instance owns (the whole arena, or one rank's ZeRO-1 shard). Shared by AdamW and SGD.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/safetensors.h"  // Shape

namespace llmt::optim {

// One parameter tensor inside the arena, as the model's parameter table describes it.
struct ParamSlot {
    std::string name;   // Hugging Face name, e.g. "transformer.h.0.attn.c_attn.weight"
    Shape shape;        // numel(shape) elements starting at `offset`
    std::size_t offset = 0;
    bool decay = false;  // weight decay applies (2-D weights); false for biases, norms, embeddings
};

// Elements [begin, end) of the arena. end == SIZE_MAX means "to the end of the arena".
struct ArenaSlice {
    std::size_t begin = 0;
    std::size_t end = SIZE_MAX;
};

// The slots cut to a slice: where each one's state lives, and the runs of adjacent elements that share
// a decay flag (one kernel call updates them all).
struct SlicePlan {
    struct Piece {  // the part of one slot inside the slice
        std::size_t slot;
        std::size_t begin, end;  // arena indices
        bool whole;              // the slot lies entirely inside the slice
    };
    struct Run {  // adjacent pieces with the same decay flag
        std::size_t begin, end;
        bool decay;
    };
    std::size_t begin = 0, end = 0;  // the slice, end resolved
    std::vector<Piece> pieces;       // in arena order
    std::vector<Run> runs;
};

// Throws (an internal error naming `who`, e.g. "AdamW") when slots overlap, leave the arena, repeat a
// name, use the reserved name "step" or have a negative extent, or when the slice is empty or outside
// the arena. Slots may leave gaps (padding), which no piece covers.
SlicePlan plan_slice(const std::vector<ParamSlot>& slots, std::size_t arena_numel, ArenaSlice slice, const char* who);

}  // namespace llmt::optim
