// The model a command reads (generate, export): from a checkpoint (its config: --config, else the resolved
// config the trainer stored in state.json) or from a Hugging Face model directory (its config.json gives
// the shape), built on the CPU in fp32 with the weights loaded.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "models/model.h"

namespace llmt::cli {

struct LoadedModel {
    config::Config config;  // with a model directory's config.json applied
    std::unique_ptr<models::Model> model;
    std::string source;  // the checkpoint directory or the model directory
};

// `command` names the subcommand in messages. A wrong or empty path is an InputError (exit 2). A LoRA
// checkpoint's model is its base (model.init_from, or drawn from run.seed) with the checkpoint's adapters,
// which must have been trained on that base (CheckpointError otherwise); with `merged` they are folded into
// the base weights (generation reads a plain model), else kept (export writes them in PEFT's format).
LoadedModel load_checkpoint_model(const std::string& command, const std::string& checkpoint,
                                  const std::string& config_path, const std::vector<std::string>& sets,
                                  bool merged = true);
// The config of a checkpoint's run: `config_path` with `sets` when given, else the resolved config the
// trainer stored in its state.json with `sets` (InputError naming the file when there is none). A wrong
// or empty checkpoint path is an InputError (exit 2).
config::Config checkpoint_run_config(const std::string& command, const std::string& checkpoint,
                                     const std::string& config_path, const std::vector<std::string>& sets);
// `dir`: an HF model directory (config.json + model.safetensors or shards) or a .safetensors file with a
// config.json beside it; `sets` override run.* keys (model keys come from config.json). with_adapter: the
// sets name a PEFT adapter (lora.r, lora.init_from), loaded onto the base and kept (the caller merges).
LoadedModel load_model_dir(const std::string& command, const std::string& dir, const std::vector<std::string>& sets,
                           bool with_adapter = false);

}  // namespace llmt::cli
