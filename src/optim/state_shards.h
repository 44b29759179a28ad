// Optimizer state saved as several slices of one arena (the ZeRO-1 shards of some number of ranks, or one
// whole-arena file) read back for any other slice: the resharding half of docs/formats/checkpoint.md
// ("Optimizer shards"). Per-element state is stored per slot as "<param><suffix>", cut to each file's
// slice, so an element's place in a file follows from the slots and the file's slice alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/safetensors.h"
#include "optim/param_slots.h"

namespace llmt::optim {

// One state file and the arena slice its metadata ("slice_begin", "slice_end") names.
struct StateShard {
    const SafetensorsFile* file = nullptr;
    std::size_t begin = 0, end = 0;
};

// Checks that every file holds state of `format` (check_state_owner's message for another optimizer's)
// for an arena of `arena_numel` elements, that their slices are disjoint and together cover
// [begin, end), and that they agree on "step" (I64 [], >= 0). Returns the shards sorted by slice and
// the step through *step. Throws CheckpointError naming the file and what differs. Reads no state.
std::vector<StateShard> check_state_shards(const std::vector<const SafetensorsFile*>& files, const std::string& format,
                                           const char* name, std::size_t arena_numel, std::size_t begin,
                                           std::size_t end, std::int64_t* step);

// For each (suffix, dst) target, fills dst (plan.end - plan.begin floats, indexed by arena index -
// plan.begin) with the state "<slot><suffix>" of every piece of `plan`, each element from the shard
// whose slice holds it. Every tensor of every target is checked (present, F32, the element count the
// shard's slice gives the slot) before anything is copied: CheckpointError naming the file and tensor,
// and every dst unchanged. Elements no piece covers (alignment gaps) are left as they are.
struct StateTarget {
    std::string suffix;  // ".exp_avg"
    float* dst;
};
void read_sharded_state(const std::vector<StateShard>& shards, const std::vector<ParamSlot>& slots,
                        const SlicePlan& plan, const std::vector<StateTarget>& targets);

}  // namespace llmt::optim
