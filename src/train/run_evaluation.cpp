// `llmtrain eval` (train/trainer.h run_evaluation): a checkpoint's or model.init_from's weights on the
// validation data, or a classifier's test set.
#include <fmt/format.h>

#include <cstdio>

#include "core/error.h"
#include "kernels/ops.h"
#include "models/hf_adapter.h"
#include "models/peft.h"
#include "models/registry.h"
#include "train/checkpoint.h"
#include "train/classifier_eval.h"
#include "train/cpu_precision.h"
#include "train/image_batches.h"
#include "train/lm_eval.h"
#include "train/model_setup.h"
#include "train/run_plan.h"
#include "train/trainer.h"

namespace llmt::train {

namespace {

// Why eval found nothing to read, and what to pass (like train's message for missing train shards).
std::string no_val_shards_message(const config::Config& cfg) {
    const std::string fix =
        "pass --set data.val_shards=GLOB (the val_*.bin shards the run trained with), or create them with `make data` "
        "or `llmtrain data prepare`";
    if (cfg.data.source != "shards") return "eval: the prepared data has no validation shards (data.val_fraction is 0)";
    if (cfg.data.val_shards.empty()) return "eval: no validation shards: data.val_shards is not set (hint: " + fix + ")";
    return fmt::format("eval: no validation shards: data.val_shards '{}' matches no file (hint: {})",
                       cfg.data.val_shards, fix);
}

// `llmtrain eval` of a classifier: the test set, as at the end of training (the table on stderr).
nlohmann::ordered_json evaluate_classifier_checkpoint(models::Model& model, const config::Config& cfg,
                                                      const std::string& source) {
    const ImageData images = load_image_data(cfg, /*need_train=*/false);
    bind_image_data(model, images);
    const ClassEval ev = evaluate_images(model, *images.test, kTestSlot, all_indices(images.test->n),
                                         cfg.trainer.micro_batch_size, 0, 1);
    const auto names = class_names(cfg);
    fmt::print(stderr, "{}", ev.table(names));
    nlohmann::ordered_json out = ev.to_json(names, "test");
    out["weights"] = source;
    return out;
}

}  // namespace

nlohmann::ordered_json run_evaluation(const config::Config& config, const std::string& checkpoint) {
    config::Config cfg = config;
    const models::HfSource init_from = models::prepare_init_from(cfg);
    models::prepare_lora_init_from(cfg);
    kernels::set_cpu_threads(cfg.run.threads);
    const Device dev = resolve_device(cfg, 1);
    const DType dtype = check_supported(cfg, dev);
    if (dev == Device::kCpu)
        kernels::set_cpu_gemm_precision(resolve_precision(cfg, dev).precision == "bf16" ? DType::kBF16 : DType::kF32);
    std::string source;
    std::unique_ptr<models::Model> model;
    if (!checkpoint.empty()) {
        Checkpoint ck = load_checkpoint(checkpoint);
        if (cfg.lora.r > 0) {  // the base as the run had it, then the checkpoint's adapters
            model = build_model(cfg, init_from, dev, dtype);
            models::check_lora_base(ck.state.value("lora_base", nlohmann::json()),
                                    models::lora_base_identity(cfg, init_from.weights), ck.dir.string());
            models::load_trained_params(*model, models::HfWeightsSource(ck.model));
        } else {
            model = models::make_model(cfg, dev, dtype);
            models::load_hf_params(*model, models::HfWeightsSource(ck.model));
        }
        source = ck.dir.string();
    } else if (!init_from.weights.empty()) {
        model = build_model(cfg, init_from, dev, dtype);
        source = init_from.weights.string();
    } else {
        throw InputError("eval: nothing to evaluate: give --checkpoint PATH, or set model.init_from");
    }
    if (cfg.model.is_classifier()) return evaluate_classifier_checkpoint(*model, cfg, source);
    const int B = cfg.trainer.micro_batch_size, T = cfg.model.block_size;
    DataPlan plan = cfg.data.source == "chat" ? open_chat_batches(cfg, B, T, 0, 1, false, {})
                                              : open_shard_batches(cfg, resolve_data(cfg, false), B, T, 0, 1, false);
    if (!plan.eval)
        throw InputError(cfg.data.source == "chat"
                             ? std::string("eval: no validation examples (data.val_fraction is 0)")
                             : no_val_shards_message(cfg));
    auto ev = evaluate(*model, *plan.eval, B, T, cfg.trainer.eval_steps);
    return {{"val_loss", ev.loss}, {"tokens", ev.tokens}, {"batches", ev.batches}, {"weights", source}};
}

}  // namespace llmt::train
