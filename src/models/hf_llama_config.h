// config.json of the families on the LLaMA graph (llama, qwen2, qwen3, mistral): the fields they share
// (hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim, intermediate_size,
// rms_norm_eps, tie_word_embeddings, hidden_act silu, RoPE in both transformers generations), read and
// written once; each family's file adds and refuses its own fields.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace llmt::config {
struct ModelConfig;
}

namespace llmt::models {

struct HfConfig;

// The shared fields of `j` (file `path`) into `c`, with RoPE (read_hf_rope). FormatError naming the field
// for a missing shape field, hidden_act other than silu, mlp_bias true, indivisible heads, and RoPE as
// read_hf_rope refuses it.
void read_hf_llama_shape(const nlohmann::json& j, const std::string& path, HfConfig& c);
// RoPE: transformers 5.x reads `rope_scaling` (legacy) in preference to `rope_parameters`, and a top-level
// `rope_theta` where the dict has none; 4.x reads rope_theta and rope_scaling, whose type is `rope_type`
// or the older `type`. Types "default" and "llama3"; others are refused naming the field. Adds
// model.rope_theta and model.rope_scaling.* to c.family_values.
void read_hf_rope(const nlohmann::json& j, const std::string& path, HfConfig& c);
// FormatError naming `layer_types` when it lists a layer type other than `allowed` (`why` says what we
// compute instead).
void refuse_hf_layer_types(const nlohmann::json& j, const std::string& path, const char* allowed, const char* why);
// The shared fields of `m` into `j`, RoPE as rope_parameters (5.x) and rope_theta + rope_scaling (4.x).
void write_hf_llama_shape(const config::ModelConfig& m, int max_position_embeddings, nlohmann::json& j);

}  // namespace llmt::models
