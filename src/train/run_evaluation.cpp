// `llmtrain eval` (train/trainer.h run_evaluation): a checkpoint's or model.init_from's weights on the
// task's evaluation data (train/task.h: a language model's validation data, a classifier's test set).
#include "core/error.h"
#include "kernels/ops.h"
#include "models/hf_adapter.h"
#include "models/peft.h"
#include "models/registry.h"
#include "train/checkpoint.h"
#include "train/cpu_precision.h"
#include "train/model_setup.h"
#include "train/run_plan.h"
#include "train/task.h"
#include "train/trainer.h"

namespace llmt::train {

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
    return make_task(cfg)->evaluate_weights(*model, source);
}

}  // namespace llmt::train
