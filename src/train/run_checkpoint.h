// A training run's checkpoints (docs/formats/checkpoint.md): what save writes and restore reads back, so a
// run stopped at any step continues exactly: the weights (sharded fp32 masters gathered; under ZeRO-3 one
// file per unit, train/zero3_state.h), the optimizer state (one file, one per rank under ZeRO-1, one per rank
// and unit under ZeRO-3, indexed in state.json: train/optimizer_shards.h), the data
// position, the counters and best metrics, the task's files beside the weights or, under LoRA, PEFT's
// adapter config. Every rank calls save and restore at the same steps; rank 0 alone writes files. Not
// thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "train/best_metric.h"
#include "train/checkpoint.h"

namespace llmt::config {
struct Config;
}
namespace llmt::models {
class Model;
}
namespace llmt::optim {
class Optimizer;
}

namespace llmt::train {

class DistContext;
class Task;
class Zero3State;
class TrainBatches;
struct TrainState;

// A run's progress, which a checkpoint carries from one process of the run to the next.
struct RunProgress {
    int64_t step = 0;
    int64_t slots = 0;      // batch slots of all ranks (state.json's "tokens")
    double prior_wall = 0;  // seconds of the run's earlier processes (state.json's "wall_s")
    BestMetric best_loss{"val_loss", /*higher_is_better=*/false};  // summary.json's best_val_loss
    BestMetric best{"val_loss", /*higher_is_better=*/false};       // the task's, which keeps checkpoints/best
};

// The pieces of a running job a checkpoint holds; they outlive the RunCheckpoints.
struct CheckpointedParts {
    const config::Config& cfg;  // the run's resolved config (state.json's "config")
    models::Model& model;
    optim::Optimizer* opt;  // the optimizer, or null under ZeRO-3 (zero3 holds one per unit)
    Zero3State* zero3;      // ZeRO-3's state, or null
    TrainBatches& batches;
    Task& task;
    DistContext& dc;
    bool zero1 = false;          // the optimizer state sharded over the ranks
    int zero_stage = 0;          // dist.zero_stage as the run takes it (state.json's "zero_stage")
    std::size_t arena_numel = 0;  // floats of the trained parameter arena
    const nlohmann::json& lora_base;  // the frozen base's identity (models/peft.h), LoRA runs only
};

class RunCheckpoints {
public:
    explicit RunCheckpoints(CheckpointedParts parts) : p_(parts) {}

    // checkpoints_dir/step_<progress.step>, written by rank 0; under ZeRO-1 every rank writes its optimizer
    // shard (under ZeRO-3 its optimizer chunks and the units it owns) into rank 0's temp directory at the
    // same time, so the one atomic rename publishes all shards together. Returns the directory on rank 0, empty on the
    // others. Throws IoError, CheckpointError.
    std::filesystem::path save(const std::filesystem::path& checkpoints_dir, const RunProgress& progress,
                               const SaveOptions& opts);

    // Weights, optimizer state (resharded for this world size and stage), data position and `progress` from
    // the checkpoint at `path` of this run's model and data. Throws InputError when the checkpoint's model
    // or data differ from this config's, CheckpointError (and load_checkpoint's errors) for a damaged one.
    void restore(const std::string& path, RunProgress& progress);

private:
    // ZeRO-1's and ZeRO-3's per-rank files into rank 0's temp directory (`w` on rank 0, null on the others).
    void write_rank_files(CheckpointWriter* w);
    void restore_optimizer(const Checkpoint& ck, const TrainState& st);
    int zero_stage() const { return p_.zero_stage; }

    CheckpointedParts p_;
    int saves_ = 0;
};

}  // namespace llmt::train
