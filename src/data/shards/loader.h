// Training and evaluation data loaders over token shards (docs/formats/shards.md): fixed windows of
// T+1 tokens, shuffled per epoch by (seed, epoch), split across W ranks so that the global batch of a
// step is the same set of windows whatever W is, with an exact, checkpointable position.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/shards/shard.h"
#include "data/shards/shard_set.h"

namespace llmt::data {

struct LoaderOptions {
    std::vector<std::string> shard_paths;  // read in sorted order as one token stream
    int B = 0;                             // rows per rank per micro-batch
    int T = 0;                             // sequence length
    int rank = 0;
    int world = 1;
    uint64_t seed = 0;
    bool shuffle = true;  // false: windows in stream order every epoch
    std::size_t vocab_size = 50257;
    ShardFormat format = ShardFormat::kLlmc;
};

// The train stream is cut into num_windows() = (tokens - 1) / T windows; window w is tokens
// [w*T, w*T + T] (inputs are the first T, targets the last T). Epoch e visits the windows in the
// order of a Fisher-Yates permutation drawn from a counter-based hash of (seed, e, i), so any rank can
// compute it alone. The loader keeps one global position p (windows consumed by all ranks together);
// stream position q is window perm_{q / N}[q % N]. Each next() consumes W*B positions: rank r takes
// p + r*B .. p + r*B + B-1. So W=1,B=8 and W=2,B=4 (ranks 0 and 1 together) read the same windows
// in the same rows, no two ranks read the same window within an epoch, and an epoch ending mid-batch
// simply continues into the next epoch's permutation (no window is dropped).
// Thread safety: none; one loader per training process.
class DataLoader {
public:
    // Throws InputError for bad options (B, T < 1, rank outside [0, world)), missing/corrupt shards
    // (FormatError naming file + offset), or shards too small for a single window of T+1 tokens.
    explicit DataLoader(LoaderOptions opts);

    // Fills this rank's B rows of the next global micro-batch: inputs and targets are B*T int32,
    // row-major, targets[i] = the token after inputs[i]. Throws FormatError on a token id >= vocab.
    void next(int32_t* inputs, int32_t* targets);

    // The exact position, for checkpoints: {"kind", "version", "position", "epoch", "cursor",
    // "num_windows", "seq_len", "seed", "shuffle", "total_tokens"}. Equal on every rank.
    nlohmann::json state() const;
    // Restores a state() from a loader over the same data and T (B and W may differ: the position
    // counts windows). Throws InputError naming the field that is missing, mistyped or mismatched.
    void restore(const nlohmann::json& state);

    std::size_t num_windows() const { return num_windows_; }
    int epoch() const { return static_cast<int>(position_ / num_windows_); }
    uint64_t position() const { return position_; }
    std::size_t total_tokens() const { return shards_.size(); }
    // The window index at global position q (exposed for tests and tools).
    std::size_t window_at(uint64_t q);

private:
    void ensure_permutation(uint64_t epoch);

    LoaderOptions opts_;
    ShardSet shards_;
    std::size_t num_windows_ = 0;
    uint64_t position_ = 0;
    int64_t perm_epoch_ = -1;
    std::vector<uint32_t> perm_;
    std::vector<int32_t> scratch_;
};

// The Fisher-Yates permutation of [0, n) for (seed, epoch), as DataLoader uses it.
std::vector<uint32_t> epoch_permutation(std::size_t n, uint64_t seed, uint64_t epoch);

struct EvalLoaderOptions {
    std::vector<std::string> shard_paths;  // the val shards, sorted, read as one stream
    int B = 0;
    int T = 0;
    int rank = 0;
    int world = 1;
    std::size_t vocab_size = 50257;
    ShardFormat format = ShardFormat::kLlmc;
};

// Deterministic evaluation, no shuffling. Eval batch b of world W covers windows
// b*W*B .. b*W*B + W*B - 1 (window w = tokens [w*T, w*T + T]); rank r takes rows r*B .. r*B+B-1
// of it, i.e. row j of rank r is the window starting at token ((b*W + r)*B + j) * T. With W = 1 this
// is "row r of batch b starts at token (b*B + r)*T", and averaging the W ranks' losses for batch b
// gives the 1-rank loss of the same batch with B' = W*B.
// Thread safety: const methods may be called concurrently.
class EvalLoader {
public:
    // Throws like DataLoader; also when the val stream is shorter than one global batch.
    explicit EvalLoader(EvalLoaderOptions opts);

    // Global batches that fit entirely in the stream.
    std::size_t num_batches() const { return num_batches_; }
    std::size_t num_windows() const { return num_windows_; }
    // Fills this rank's B rows of eval batch b (b < num_batches()).
    void batch(std::size_t b, int32_t* inputs, int32_t* targets) const;

private:
    EvalLoaderOptions opts_;
    ShardSet shards_;
    std::size_t num_windows_ = 0;
    std::size_t num_batches_ = 0;
};

}  // namespace llmt::data
