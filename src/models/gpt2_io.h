// model.init_from for a model directory or file: which safetensors file holds the weights, and the
// GPT-2 fact the tensors cannot tell (the LayerNorm eps in a config.json beside them). The weights
// themselves load through models/hf_adapter.h.
#pragma once

#include <filesystem>
#include <string>

#include "models/gpt2.h"

namespace llmt::models {

// InputError naming model.norm_eps when a config.json beside `weights_path` has another layer_norm_epsilon.
void gpt2_check_norm_eps(const Gpt2Config& cfg, const std::filesystem::path& weights_path);

// Resolves model.init_from: a .safetensors file, or a directory holding model.safetensors.
std::filesystem::path gpt2_resolve_init_from(const std::string& init_from);

}  // namespace llmt::models
