// GPT-2 weights in Hugging Face's layout: what model.safetensors holds, so our checkpoints load in
// `transformers` (GPT2LMHeadModel) and HF GPT-2 checkpoints load here (model.init_from).
// HF differences from our arena: Conv1D weights are stored transposed ((in, out)); wte has V rows (we pad
// to Vp); a tied lm_head is not stored; hub files may omit the "transformer." prefix and carry the
// attention-mask buffers "attn.bias"/"attn.masked_bias", which are ignored.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/safetensors.h"
#include "models/gpt2.h"

namespace llmt::models {

// Tensors of `arena` (the parameters, or a same-layout arena such as the gradients) in HF layout.
// The returned refs point into `scratch`, which must outlive their use.
std::vector<TensorRef> gpt2_hf_tensors(const Gpt2& model, const Arena& arena, std::vector<std::vector<float>>& scratch);

// Copies HF-layout tensors from `file` into `arena` (the model's layout): transposes Conv1D weights,
// pads wte rows with zeros, crops a position table longer than block_size to its first rows.
// Throws CheckpointError listing every missing, unexpected or mis-shaped tensor (nothing is changed then),
// InputError naming model.norm_eps when a config.json beside the file has another layer_norm_epsilon.
void gpt2_load_hf(const Gpt2& model, Arena& arena, const SafetensorsFile& file);

// Writes model.safetensors (HF names and layout) and, beside it, config.json for transformers.
void gpt2_save_hf(const Gpt2& model, const std::filesystem::path& safetensors_path,
                  const std::map<std::string, std::string>& metadata = {});
void gpt2_write_hf_config(const Gpt2Config& cfg, const std::filesystem::path& dir);

// Resolves model.init_from: a .safetensors file, or a directory holding model.safetensors.
std::filesystem::path gpt2_resolve_init_from(const std::string& init_from);

}  // namespace llmt::models
