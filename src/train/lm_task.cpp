// train/lm_task.h.
#include "train/lm_task.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"
#include "train/batches.h"
#include "train/dist_context.h"
#include "train/hf_model_files.h"
#include "train/lm_eval.h"
#include "train/model_setup.h"

namespace llmt::train {

namespace {

// Why eval found nothing to read, and what to pass (like train's message for missing train shards).
std::string no_val_shards_message(const config::Config& cfg) {
    const std::string fix =
        "pass --set data.val_shards=GLOB (the val_*.bin shards the run trained with), or create them with `make data` "
        "or `llmtrain data prepare`";
    if (cfg.data.source != "shards")
        return "eval: the prepared data has no validation shards (data.val_fraction is 0)";
    if (cfg.data.val_shards.empty())
        return "eval: no validation shards: data.val_shards is not set (hint: " + fix + ")";
    return fmt::format("eval: no validation shards: data.val_shards '{}' matches no file (hint: {})",
                       cfg.data.val_shards, fix);
}

class LanguageModelTask final : public Task {
public:
    explicit LanguageModelTask(const config::Config& cfg) : cfg_(cfg), hf_files_(cfg, "float32") {}

    int row_width() const override { return cfg_.model.block_size; }
    CountUnit unit() const override { return {"tokens", "token", "tok/s", 1}; }
    BestMetric best_metric() const override { return BestMetric("val_loss", /*higher_is_better=*/false); }

    std::unique_ptr<TrainBatches> open_training_data(models::Model&, DistContext& dc, int B) override {
        DataPlan plan = open(B, dc.rank(), dc.world(), /*train=*/true, [&dc] { dc.barrier(); });
        eval_ = std::move(plan.eval);
        return std::move(plan.train);
    }
    std::optional<int64_t> steps_for_epochs(int) const override { return std::nullopt; }

    bool evaluates() const override { return eval_ != nullptr; }

    // Every rank evaluated its rows of the same batches: windows average the ranks' means, chat rows
    // divide the ranks' summed losses by their summed targets.
    Evaluation evaluate(models::Model& model, DistContext& dc, int B, int64_t eval_steps) override {
        EvalOutput ev = train::evaluate(model, *eval_, B, row_width(), eval_steps);
        ev.loss = ev.weighted ? dc.mean(ev.loss_sum) / dc.mean(ev.weight) : dc.mean(ev.loss);
        ev.tokens = static_cast<int64_t>(std::llround(dc.mean(static_cast<double>(ev.tokens)) * dc.world()));
        return {ev.loss, ev.loss,
                {{"val_loss", ev.loss}, {"val_ppl", std::exp(ev.loss)}, {"val_tokens", ev.tokens}},
                fmt::format("val loss {:.4f} (ppl {:.1f})", ev.loss, std::exp(ev.loss))};
    }

    FinalReport final_report(models::Model&, DistContext&, int) override { return {}; }

    std::optional<std::string> write_checkpoint_files(const std::filesystem::path& dir) override {
        hf_files_.write(dir);  // config.json, generation_config.json, the run's tokenizer
        return hf_files_.take_note();
    }

    nlohmann::ordered_json evaluate_weights(models::Model& model, const std::string& source) override {
        const int B = cfg_.trainer.micro_batch_size, T = row_width();
        DataPlan plan = open(B, 0, 1, /*train=*/false, {});
        if (!plan.eval)
            throw InputError(cfg_.data.source == "chat"
                                 ? std::string("eval: no validation examples (data.val_fraction is 0)")
                                 : no_val_shards_message(cfg_));
        const EvalOutput ev = train::evaluate(model, *plan.eval, B, T, cfg_.trainer.eval_steps);
        return {{"val_loss", ev.loss}, {"tokens", ev.tokens}, {"batches", ev.batches}, {"weights", source}};
    }

private:
    // data.source chat: chat rows (rank 0 builds the cache, `barrier` lets the others wait for it); else
    // windows of the shards (text, jsonl and hf prepared into the cache first).
    DataPlan open(int B, int rank, int world, bool train, const std::function<void()>& barrier) const {
        if (cfg_.data.source == "chat") return open_chat_batches(cfg_, B, row_width(), rank, world, train, barrier);
        return open_shard_batches(cfg_, resolve_data(cfg_, train), B, row_width(), rank, world, train);
    }

    config::Config cfg_;
    HfModelFiles hf_files_;  // checkpoints hold fp32 tensors
    std::unique_ptr<EvalBatches> eval_;
};

}  // namespace

std::unique_ptr<Task> make_lm_task(const config::Config& cfg) { return std::make_unique<LanguageModelTask>(cfg); }

}  // namespace llmt::train
