// A checkpoint's optimizer state as files of arena slices (docs/formats/checkpoint.md, "Optimizer
// shards"): the index state.json carries ("optimizer_shards"), and the restore of any rank's slice from
// them whatever world size and ZeRO stage wrote them (optim/state_shards.h does the reading).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "optim/param_slots.h"

namespace llmt::optim {
class Optimizer;
}

namespace llmt::train {

struct Checkpoint;
struct TrainState;

// One optimizer state file of a checkpoint directory and the arena slice [begin, end) it holds.
struct OptimizerShardFile {
    std::string file;  // a plain file name inside the step directory
    std::size_t begin = 0, end = 0;
};

// ZeRO-1's state file of one rank: "optimizer.rank<k>.safetensors".
std::string zero_optimizer_file(int rank);

// The files a run of `world` ranks writes: optimizer.safetensors with the whole arena (zero1 false), or
// one optimizer.rank<k>.safetensors per rank with its zero_shard (train/dist_context.h).
std::vector<OptimizerShardFile> optimizer_shard_files(std::size_t arena_numel, int world, bool zero1);
nlohmann::json optimizer_index_json(const std::vector<OptimizerShardFile>& files);

// The checkpoint's files: state.json's "optimizer_shards" when present, else those a run of the state's
// world_size and zero_stage wrote (checkpoints from before the index). Throws CheckpointError naming
// state.json for a malformed index (a non-array, an entry without a plain file name or with an empty
// slice).
std::vector<OptimizerShardFile> read_optimizer_index(const Checkpoint& ck, const TrainState& st);

// Restores `opt`, which owns `slice` of the arena, from the checkpoint: through load_state when one file
// holds exactly that slice (every difference listed), otherwise from the files whose slices meet it, each
// verified as load_checkpoint verifies its own files (checksums, NaN/inf), through load_state_shards.
// Opens no file it does not read. Returns the number of files read. Throws CheckpointError (a file missing,
// or load_state's / load_state_shards' errors).
std::size_t restore_optimizer_state(optim::Optimizer& opt, const Checkpoint& ck,
                                    const std::vector<OptimizerShardFile>& index, optim::ArenaSlice slice);

}  // namespace llmt::train
