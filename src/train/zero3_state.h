// ZeRO-3's training state (docs/distributed.md "ZeRO-3"): the per-unit gathers attached to the model, one
// optimizer per unit over this rank's chunk of it (a slice of the flat arena, so the optimizer state files
// are the arena-slice files every stage reads: train/optimizer_shards.h), and the checkpoint's model and
// optimizer files written by every rank without any rank holding more than one unit whole:
// - optimizer.rank<k>.unit<u>.safetensors: rank k's chunk of unit u, indexed in state.json;
// - model-<u+1>-of-<U>.safetensors: unit u's whole fp32 tensors in Hugging Face names, written by rank
//   u mod world, and model.safetensors.index.json (rank 0), as transformers writes sharded weights.
// One per training process; not thread-safe; every rank makes the same calls (they are collectives).
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "optim/param_slots.h"
#include "train/optimizer_shards.h"
#include "train/zero3_gather.h"

namespace llmt::models {
class Model;
}
namespace llmt::optim {
class Optimizer;
}

namespace llmt::train {

struct Checkpoint;

class Zero3State {
public:
    using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(optim::ArenaSlice slice)>;
    // model: trained parameters sharded in groups over dc's ranks (models::make_model with a ParamShard);
    // `make` builds the optimizer of one arena slice. Attaches the gathers to the model until destroyed.
    Zero3State(DistContext& dc, models::Model& model, const MakeOptimizer& make);
    ~Zero3State();
    Zero3State(const Zero3State&) = delete;
    Zero3State& operator=(const Zero3State&) = delete;

    // The global sum of squares of the step's gradient (the chunks' mean over ranks, summed over ranks).
    double grad_sum_squares();
    // Every unit's optimizer on this rank's chunk of its masters and gradients.
    void step(float lr, float grad_scale);

    // The optimizer files of every rank, as state.json indexes them.
    std::vector<OptimizerShardFile> optimizer_files() const;
    // This rank's optimizer files into `dir` (a checkpoint's temp directory every rank sees).
    void write_optimizer(const std::filesystem::path& dir) const;
    // This rank's chunks from any checkpoint's optimizer files (any world size and stage). Returns the
    // number of files read. Throws CheckpointError (restore_optimizer_state's).
    std::size_t restore_optimizer(const Checkpoint& ck, const std::vector<OptimizerShardFile>& index);
    // The model's weights into `dir`, unit by unit (each gathered in fp32 on every rank, written by its
    // owner), and the index (rank 0). Returns the file names (index last).
    std::vector<std::string> write_model(const std::filesystem::path& dir);

    Zero3Gather& gather() { return gather_; }

private:
    optim::ArenaSlice slice_of(std::size_t g, int rank) const;

    DistContext& dc_;
    models::Model& model_;
    Zero3Gather gather_;
    std::vector<std::unique_ptr<optim::Optimizer>> opts_;  // per unit; null where this rank's chunk is empty
    long steps_ = 0;
};

// "optimizer.rank<k>.unit<u>.safetensors" and "model-<u+1, 5 digits>-of-<units, 5 digits>.safetensors".
std::string zero3_optimizer_file(int rank, std::size_t unit);
std::string zero3_model_file(std::size_t unit, std::size_t units);

}  // namespace llmt::train
