// What the trainer and `eval` read, behind one interface: fixed windows of token shards (data/shards/loader.h)
// or chat rows with assistant-only targets and per-example positions (data/chat/chat_loader.h). The step's
// loss is the mean over its target tokens (all micro-batches, all ranks); windows have B*T targets each,
// so there it is the mean of the micro-batches' means, as it always was.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/shards/shard.h"

namespace llmt::train {

struct MicroBatch {
    int T = 0;               // slots per row written (row stride of x, y, pos)
    int64_t targets = 0;     // this rank's targets >= 0
    bool positions = false;  // pos was written: the model must restart positions and attention per example
};

class TrainBatches {
public:
    virtual ~TrainBatches() = default;
    // This rank's B rows of the next micro-batch; x, y, pos hold B * T (the configured T) each.
    virtual MicroBatch next(int32_t* x, int32_t* y, int32_t* pos) = 0;
    // All ranks' targets in the next k micro-batches, the same on every rank; 0 when every micro-batch
    // weighs the same (windows: each has B*T targets).
    virtual int64_t global_targets_ahead(int k) const = 0;
    virtual nlohmann::json state() const = 0;
    // InputError naming the field that does not match.
    virtual void restore(const nlohmann::json& state) = 0;
    virtual std::size_t num_rows() const = 0;  // windows or chat rows of an epoch
    // Whether every micro-batch holds B x T slots on every rank (windows, images); unpacked chat rows are
    // as wide as the longest of a rank's B rows.
    virtual bool fixed_width() const { return true; }
    virtual std::string describe() const = 0;  // one line for the log
};

class EvalBatches {
public:
    virtual ~EvalBatches() = default;
    virtual std::size_t num_batches() const = 0;
    virtual MicroBatch batch(std::size_t b, int32_t* x, int32_t* y, int32_t* pos) const = 0;
};

struct ShardFiles {
    std::vector<std::string> train, val;
    data::ShardFormat format = data::ShardFormat::kLlmc;
};

struct DataPlan {
    std::unique_ptr<TrainBatches> train;  // null for eval-only opening
    std::unique_ptr<EvalBatches> eval;    // null without validation data
};

// Windows of T+1 tokens over the shards (data/shards/loader.h), shuffled per epoch unless data.shuffle is off.
DataPlan open_shard_batches(const config::Config& cfg, const ShardFiles& files, int B, int T, int rank, int world,
                            bool train);
// data.source chat: the cache is built by rank 0 first (`barrier` lets the others wait for it), then each
// rank opens it. The eval split exists when data.val_fraction > 0.
DataPlan open_chat_batches(const config::Config& cfg, int B, int T, int rank, int world, bool train,
                           const std::function<void()>& barrier);

// Mean loss over the eval batches' targets (windows: over every position), `steps` batches at most:
// loss_sum = sum over batches of (mean loss x targets), targets = their count (this rank's).
struct EvalSums {
    double loss_sum = 0;
    int64_t targets = 0;
    int64_t batches = 0;
    int64_t slots = 0;  // positions evaluated (tokens)
};

}  // namespace llmt::train
