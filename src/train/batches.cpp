#include "train/batches.h"

#include <fmt/format.h>

#include <optional>

#include "config/arch_table.h"
#include "core/check.h"
#include "core/error.h"
#include "data/chat/chat_cache.h"
#include "data/chat/chat_loader.h"
#include "data/shards/loader.h"

namespace llmt::train {

namespace {

// Windows of the token shards: every slot a target, no positions.
class ShardBatches final : public TrainBatches {
public:
    explicit ShardBatches(data::LoaderOptions o) : B_(o.B), T_(o.T), loader_(std::move(o)) {}
    MicroBatch next(int32_t* x, int32_t* y, int32_t*) override {
        loader_.next(x, y);
        return {T_, static_cast<int64_t>(B_) * T_, false};
    }
    int64_t global_targets_ahead(int) const override { return 0; }
    nlohmann::json state() const override { return loader_.state(); }
    void restore(const nlohmann::json& s) override { loader_.restore(s); }
    std::size_t num_rows() const override { return loader_.num_windows(); }
    std::string describe() const override {
        return fmt::format("{} windows of {} tokens ({} tokens)", loader_.num_windows(), T_, loader_.total_tokens());
    }

private:
    int B_, T_;
    data::DataLoader loader_;
};

class ShardEval final : public EvalBatches {
public:
    explicit ShardEval(data::EvalLoaderOptions o) : B_(o.B), T_(o.T), loader_(std::move(o)) {}
    std::size_t num_batches() const override { return loader_.num_batches(); }
    MicroBatch batch(std::size_t b, int32_t* x, int32_t* y, int32_t*) const override {
        loader_.batch(b, x, y);
        return {T_, static_cast<int64_t>(B_) * T_, false};
    }

private:
    int B_, T_;
    data::EvalLoader loader_;
};

class ChatBatches final : public TrainBatches {
public:
    ChatBatches(const data::ChatData& d, data::ChatLoaderOptions o) : T_(o.T), loader_(d, o) {}
    MicroBatch next(int32_t* x, int32_t* y, int32_t* pos) override {
        const data::ChatBatch b = loader_.next(x, y, pos);
        return {b.T, b.targets, true};
    }
    int64_t global_targets_ahead(int k) const override { return loader_.global_targets_ahead(k); }
    nlohmann::json state() const override { return loader_.state(); }
    void restore(const nlohmann::json& s) override { loader_.restore(s); }
    std::size_t num_rows() const override { return loader_.num_rows(); }
    bool fixed_width() const override { return false; }
    std::string describe() const override { return loader_.stats().summary(T_); }

private:
    int T_;
    data::ChatLoader loader_;
};

class ChatEval final : public EvalBatches {
public:
    ChatEval(const data::ChatData& d, data::ChatEvalOptions o) : loader_(d, o) {}
    std::size_t num_batches() const override { return loader_.num_batches(); }
    MicroBatch batch(std::size_t b, int32_t* x, int32_t* y, int32_t* pos) const override {
        const data::ChatBatch c = loader_.batch(b, x, y, pos);
        return {c.T, c.targets, true};
    }

private:
    data::ChatEvalLoader loader_;
};

}  // namespace

DataPlan open_shard_batches(const config::Config& cfg, const ShardFiles& files, int B, int T, int rank, int world,
                            bool train) {
    DataPlan plan;
    const auto vocab = static_cast<std::size_t>(cfg.model.vocab_size);
    if (train) {
        data::LoaderOptions lo;
        lo.shard_paths = files.train;
        lo.B = B;
        lo.T = T;
        lo.rank = rank;
        lo.world = world;
        lo.seed = cfg.run.seed;
        lo.shuffle = cfg.data.shuffle;
        lo.vocab_size = vocab;
        lo.format = files.format;
        plan.train = std::make_unique<ShardBatches>(lo);
    }
    if (files.val.empty()) return plan;
    data::EvalLoaderOptions eo;
    eo.shard_paths = files.val;
    eo.B = B;
    eo.T = T;
    eo.rank = rank;
    eo.world = world;
    eo.vocab_size = vocab;
    eo.format = files.format;
    plan.eval = std::make_unique<ShardEval>(eo);
    return plan;
}

DataPlan open_chat_batches(const config::Config& cfg, int B, int T, int rank, int world, bool train,
                           const std::function<void()>& barrier) {
    LLMT_CHECK(config::has_rotary_positions(cfg.model.arch),
               "data.source: chat needs a model with rotary positions (model.arch: {}), found {}",
               config::families_with_rotary_positions(), cfg.model.arch);
    data::ChatDataOptions co;
    co.paths = cfg.data.paths;
    co.tokenizer = cfg.data.tokenizer;
    co.cache_dir = cfg.data.cache_dir;
    co.val_fraction = cfg.data.val_fraction;
    co.seed = cfg.run.seed;
    co.revision = cfg.data.revision;
    // Rank 0 tokenizes into the cache; the others open what it wrote.
    std::optional<data::ChatData> d;
    if (rank == 0) d = data::open_chat_data(co);
    if (barrier) barrier();
    if (rank != 0) d = data::open_chat_data(co);
    DataPlan plan;
    const auto vocab = static_cast<std::size_t>(cfg.model.vocab_size);
    if (train) {
        data::ChatLoaderOptions lo;
        lo.B = B;
        lo.T = T;
        lo.rank = rank;
        lo.world = world;
        lo.seed = cfg.run.seed;
        lo.shuffle = cfg.data.shuffle;
        lo.packing = cfg.data.packing;
        lo.vocab_size = vocab;
        plan.train = std::make_unique<ChatBatches>(*d, lo);
    }
    if (d->val.empty()) return plan;
    data::ChatEvalOptions eo;
    eo.B = B;
    eo.T = T;
    eo.rank = rank;
    eo.world = world;
    eo.packing = cfg.data.packing;
    eo.vocab_size = vocab;
    plan.eval = std::make_unique<ChatEval>(*d, eo);
    return plan;
}

}  // namespace llmt::train
