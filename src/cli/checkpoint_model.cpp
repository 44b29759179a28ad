#include "cli/checkpoint_model.h"

#include <fmt/format.h>

#include "config/loader.h"
#include "core/error.h"
#include "models/hf_adapter.h"
#include "models/hf_resolve.h"
#include "models/hf_weights.h"
#include "models/peft.h"
#include "models/registry.h"
#include "train/checkpoint.h"

namespace llmt::cli {

namespace {

config::Config checkpoint_config(const train::Checkpoint& ck, const std::string& command,
                                 const std::string& config_path, const std::vector<std::string>& sets) {
    if (!config_path.empty()) {
        config::Config c = config::load_config_file(config_path, sets);
        models::resolve_hub_revisions(c);  // data.tokenizer as a hub cache folder: its snapshot
        return c;
    }
    if (!ck.state.contains("config") || !ck.state["config"].is_object())
        throw InputError(fmt::format("{}: {} has no \"config\" object; pass --config with the run's config.yaml",
                                     command, (ck.dir / train::kStateFile).string()));
    // JSON is YAML: the stored config goes through the same strict loader as a file.
    config::Config c =
        config::load_config_string(ck.state["config"].dump(), (ck.dir / train::kStateFile).string(), sets);
    models::resolve_hub_revisions(c);
    return c;
}

train::Checkpoint open_checkpoint(const std::string& command, const std::string& checkpoint) {
    try {
        return train::load_checkpoint(checkpoint);
    } catch (const CheckpointError& e) {
        // The path is user input: a wrong or empty one is a usage problem (exit 2).
        throw InputError(fmt::format("{}: --checkpoint '{}': {}", command, checkpoint, e.what()));
    }
}

}  // namespace

config::Config checkpoint_run_config(const std::string& command, const std::string& checkpoint,
                                     const std::string& config_path, const std::vector<std::string>& sets) {
    if (!config_path.empty()) {
        config::Config c = config::load_config_file(config_path, sets);
        models::resolve_hub_revisions(c);
        return c;
    }
    if (checkpoint.empty())
        throw UsageError(
            fmt::format("{}: give --checkpoint PATH (its run's config is used) or --config FILE", command));
    return checkpoint_config(open_checkpoint(command, checkpoint), command, config_path, sets);
}

LoadedModel load_checkpoint_model(const std::string& command, const std::string& checkpoint,
                                  const std::string& config_path, const std::vector<std::string>& sets, bool merged) {
    const train::Checkpoint ck = open_checkpoint(command, checkpoint);
    LoadedModel out{checkpoint_config(ck, command, config_path, sets), nullptr, ck.dir.string()};
    if (out.config.lora.r == 0) {
        out.model = models::make_model(out.config);
        models::load_hf_params(*out.model, models::HfWeightsSource(ck.model));
        return out;
    }
    const models::HfSource base = models::prepare_init_from(out.config);
    out.model = models::make_model(out.config);
    if (base.weights.empty()) {
        out.model->init_random(out.config.run.seed);
    } else {
        const models::HfWeights weights = models::HfWeights::open(base.weights);
        models::load_hf_params(*out.model, models::HfWeightsSource(weights));
    }
    models::check_lora_base(ck.state.value("lora_base", nlohmann::json()),
                            models::lora_base_identity(out.config, base.weights), ck.dir.string());
    models::load_trained_params(*out.model, models::HfWeightsSource(ck.model));
    if (merged) out.model->merge_adapters();
    return out;
}

LoadedModel load_model_dir(const std::string& command, const std::string& dir, const std::vector<std::string>& sets,
                           bool with_adapter) {
    // A config with only model.init_from written: config.json supplies every model key.
    const nlohmann::json doc = {{"schema_version", 1}, {"model", {{"init_from", dir}}}};
    LoadedModel out{config::load_config_string(doc.dump(), fmt::format("{} --model", command), sets,
                                               config::ConfigUse::kModelOnly),
                    nullptr, dir};
    const models::HfSource src = models::prepare_init_from(out.config);
    if (with_adapter) models::prepare_lora_init_from(out.config);
    out.model = models::make_model(out.config);
    const models::HfWeights weights = models::HfWeights::open(src.weights);
    models::load_hf_params(*out.model, models::HfWeightsSource(weights));
    if (with_adapter) models::load_peft_adapter(*out.model, out.config.lora.init_from);
    return out;
}

}  // namespace llmt::cli
