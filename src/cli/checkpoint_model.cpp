#include "cli/checkpoint_model.h"

#include <fmt/format.h>

#include "config/loader.h"
#include "core/error.h"
#include "models/hf_adapter.h"
#include "models/registry.h"

namespace llmt::cli {

namespace {

config::Config checkpoint_config(const train::Checkpoint& ck, const std::string& command,
                                 const std::string& config_path, const std::vector<std::string>& sets) {
    if (!config_path.empty()) return config::load_config_file(config_path, sets);
    if (!ck.state.contains("config") || !ck.state["config"].is_object())
        throw InputError(fmt::format("{}: {} has no \"config\" object; pass --config with the run's config.yaml",
                                     command, (ck.dir / train::kStateFile).string()));
    // JSON is YAML: the stored config goes through the same strict loader as a file.
    return config::load_config_string(ck.state["config"].dump(), (ck.dir / train::kStateFile).string(), sets);
}

}  // namespace

CheckpointModel load_checkpoint_model(const std::string& command, const std::string& checkpoint,
                                      const std::string& config_path, const std::vector<std::string>& sets) {
    train::Checkpoint ck = [&] {
        try {
            return train::load_checkpoint(checkpoint);
        } catch (const CheckpointError& e) {
            // The path is user input: a wrong or empty one is a usage problem (exit 2).
            throw InputError(fmt::format("{}: --checkpoint '{}': {}", command, checkpoint, e.what()));
        }
    }();
    config::Config cfg = checkpoint_config(ck, command, config_path, sets);
    std::unique_ptr<models::Model> model = models::make_model(cfg);
    models::load_hf_params(*model, models::SafetensorsSource(ck.model));
    return {std::move(ck), std::move(cfg), std::move(model)};
}

}  // namespace llmt::cli
