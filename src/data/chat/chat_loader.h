// Training and evaluation loaders over chat examples (data.source: chat; docs/formats/chat_jsonl.md):
// rows of (input, target, position) slots planned by ChatRows (one example a row, or packed), shuffled
// per epoch by (seed, epoch) and split across W ranks exactly as data::DataLoader splits windows, with an
// exact, checkpointable position.
//
// Opening (config keys in brackets; rank 0 first, then a barrier, then the others: chat_cache.h):
//   ChatData d = open_chat_data({[data.paths], [data.tokenizer], [data.cache_dir], [data.val_fraction],
//                                [run.seed]});
//   ChatLoader train(d, {B = [trainer.micro_batch_size], T = [model.block_size], rank, world, [run.seed],
//                        [data.shuffle], [data.packing], [model.vocab_size]});
//   log train.stats().summary(T)   // rows, slots used, truncated/dropped examples
//   ChatEvalLoader val(d, {B, T, rank, world, [data.packing], [model.vocab_size]});
//   checkpoint train.state(); on resume train.restore(state)
//
// How the trainer uses it (one optimizer step of K = trainer.grad_accum_steps micro-batches):
//   const int64_t n = loader.global_targets_ahead(K);  // targets of the whole step, all ranks: no collective
//   for k in 0..K-1:
//       ChatBatch b = loader.next(x, y, pos);          // this rank's B rows, each b.T slots, row-major
//       forward(x, y, pos, B, b.T) and backward, weighting each target's loss by 1 / n (y < 0: weight 0)
//       (a loss that is the mean over the micro-batch's own b.targets targets: scale it by b.targets / n;
//       b.targets may be 0 in a short evaluation batch)
//   all-reduced with SUM, the step's gradient is then the mean over its n targets (dist::Reducer averages,
//   ReduceOp::kAvg: there, weight by W / n instead)
// Every rank computes the same n, so the result is the same whatever W, B and K are (the issue's "averaged
// over target tokens, consistently across gradient accumulation and ranks"). targets_ahead(K) is this
// rank's share of n (what an all-reduce of it over the ranks would add up to n).
//
// positions (B, T) are HF position_ids: 0 at each example's first slot, +1 per slot; a row's unused tail
// (pad id, target -1) restarts at 0 as well. Attention must not cross examples: a slot at position p
// attends to the p slots before it and itself.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "data/chat/chat_cache.h"
#include "data/chat/chat_rows.h"

namespace llmt::data {

struct ChatLoaderOptions {
    int B = 0;  // rows per rank per micro-batch
    int T = 0;  // slots per row at most (model.block_size)
    int rank = 0;
    int world = 1;
    uint64_t seed = 0;
    bool shuffle = true;   // data.shuffle; false: rows in plan order every epoch
    bool packing = false;  // data.packing
    std::size_t vocab_size = 0;  // model.vocab_size: every token id and the pad id must be below it
};

// What next() wrote for this rank.
struct ChatBatch {
    int T = 0;            // slots per row: opts.T when packing, else the longest of this rank's B rows (<= opts.T)
    int64_t targets = 0;  // targets >= 0 in this rank's B rows
};

// Rows are the train split's (ChatData::train) laid out by ChatRows. Epoch e visits them in the order of
// epoch_permutation(num_rows, seed, e) (loader.h); the loader keeps one global position p (rows consumed
// by all ranks together), and each next() consumes W*B positions, rank r taking p + r*B .. p + r*B + B-1.
// So W=2 ranks of B rows read the same rows in the same places as W=1 of 2B rows, and an epoch ending
// mid-batch continues into the next epoch's permutation.
// Thread safety: none; one loader per training process.
class ChatLoader {
public:
    // Throws InputError for a token id >= opts.vocab_size (naming the cache directory) or a train split with
    // no row (every example dropped); InternalError for B, T < 1 or a rank outside [0, world).
    ChatLoader(const ChatData& data, ChatLoaderOptions opts);

    // Fills this rank's B rows of the next micro-batch: inputs, targets and positions are B * result.T
    // int32 each, row-major with row stride result.T (the caller's buffers hold B * opts.T).
    ChatBatch next(int32_t* inputs, int32_t* targets, int32_t* positions);
    // What next() will return `ahead` calls from now (0: the next one), without advancing.
    ChatBatch peek(int ahead = 0) const;
    // Targets in this rank's rows of the next k micro-batches, and in all W ranks' rows of them.
    int64_t targets_ahead(int k) const;
    int64_t global_targets_ahead(int k) const;

    // {"kind", "version", "position", "epoch", "cursor", "num_rows", "seq_len", "seed", "shuffle",
    // "packing", "slots", "data_key"}; equal on every rank.
    nlohmann::json state() const;
    // Restores a state() of a loader over the same data, T, seed, shuffle and packing (B and W may differ).
    // Throws InputError naming the field that is missing, mistyped or mismatched.
    void restore(const nlohmann::json& state);

    std::size_t num_rows() const { return rows_.size(); }
    const ChatRowStats& stats() const { return rows_.stats(); }
    uint64_t position() const { return position_; }
    int epoch() const { return static_cast<int>(position_ / rows_.size()); }
    // The row at global position q (exposed for tests).
    std::size_t row_at(uint64_t q) const;

private:
    ChatBatch batch_info(uint64_t first) const;  // this rank's rows starting at global position `first`
    uint64_t rank_first(int ahead, int rank) const;

    std::shared_ptr<const ChatDataset> examples_;
    ChatLoaderOptions opts_;
    ChatRows rows_;
    uint32_t pad_id_ = 0;
    std::string key_;
    uint64_t position_ = 0;
    mutable int64_t perm_epoch_ = -1;
    mutable std::vector<uint32_t> perm_;
};

struct ChatEvalOptions {
    int B = 0;
    int T = 0;
    int rank = 0;
    int world = 1;
    bool packing = false;
    std::size_t vocab_size = 0;
};

// Deterministic evaluation over the validation split (ChatData::val), rows in plan order. Batch b covers
// rows b*W*B .. b*W*B + W*B - 1, rank r taking rows (b*W + r)*B .. +B-1; the last batch may be short, its
// missing rows all pad (no target), so every validation example is evaluated exactly once.
// Thread safety: const methods may be called concurrently.
class ChatEvalLoader {
public:
    // Throws InputError when the validation split is empty (data.val_fraction 0) or has no row, or a token
    // id >= opts.vocab_size.
    ChatEvalLoader(const ChatData& data, ChatEvalOptions opts);

    std::size_t num_batches() const { return num_batches_; }
    // Fills this rank's B rows of batch b (b < num_batches()), as ChatLoader::next.
    ChatBatch batch(std::size_t b, int32_t* inputs, int32_t* targets, int32_t* positions) const;
    ChatBatch info(std::size_t b) const;            // this rank's, without filling
    int64_t global_targets(std::size_t b) const;    // all ranks' targets of batch b
    const ChatRowStats& stats() const { return rows_.stats(); }

private:
    std::shared_ptr<const ChatDataset> examples_;
    ChatEvalOptions opts_;
    ChatRows rows_;
    uint32_t pad_id_ = 0;
    std::size_t num_batches_ = 0;
};

}  // namespace llmt::data
