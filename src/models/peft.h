// PEFT's LoRA adapter directory (what `PeftModel.from_pretrained` reads and `save_pretrained` writes):
// adapter_config.json (peft_type LORA, r, lora_alpha, target_modules, use_rslora, ...) and
// adapter_model.safetensors with base_model.model.<module>.lora_A.weight (r, in) and .lora_B.weight
// (out, r) per adapted module. docs/lora.md.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "models/model.h"

namespace llmt::config {
struct Config;
}

namespace llmt::models {

inline constexpr const char* kAdapterConfigFile = "adapter_config.json";
inline constexpr const char* kAdapterWeightsFile = "adapter_model.safetensors";

// adapter_config.json for the model's adapters; base = base_model_name_or_path (the base model's
// directory, or "" for a base drawn from a seed).
nlohmann::ordered_json peft_adapter_config(const Model& model, const std::string& base);

// lora.init_from: reads DIR/adapter_config.json and takes lora.r, lora.alpha, lora.target_modules and
// lora.use_rslora from it where the config does not write them; a written key that differs, or a PEFT
// feature we do not run (bias other than "none", DoRA, rank/alpha patterns, layers_to_transform,
// modules_to_save, another peft_type), is an InputError naming the file and field. No-op without
// lora.init_from.
void prepare_lora_init_from(config::Config& cfg);

// Loads DIR/adapter_model.safetensors into the model's adapters (CheckpointError listing missing,
// unexpected or mis-shaped tensors).
void load_peft_adapter(Model& model, const std::filesystem::path& dir);

// What a LoRA checkpoint records about its base model, so that a resume or an eval on another base is
// refused: {"init_from": path, "sha256": over config.json and the *.safetensors files in name order}, or
// {"init_from": "scratch", "seed": run.seed} for a base drawn from the seed.
nlohmann::json lora_base_identity(const config::Config& cfg, const std::filesystem::path& weights);
// Throws CheckpointError naming `checkpoint` when `recorded` (a checkpoint's) names another base than
// `current`: another content hash, or another seed (the paths may differ).
void check_lora_base(const nlohmann::json& recorded, const nlohmann::json& current, const std::string& checkpoint);

// Writes DIR/adapter_model.safetensors (fp32) and DIR/adapter_config.json, each atomically.
void write_peft_adapter(const Model& model, const std::filesystem::path& dir, const std::string& base);

}  // namespace llmt::models
