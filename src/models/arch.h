// The architecture registry: one ArchSpec per model family, defined in the family's own file
// (models/gpt2.cpp, llama.cpp, qwen2.cpp, qwen3.cpp, mistral.cpp, classifier.cpp) and listed once in
// registry.cpp. Everything outside src/models/ that needs a family's facts (make a model, plan its memory,
// count its FLOPs, read or write its config.json, PEFT's defaults) goes through here, never comparing a
// name. The config layer's view of the same family (name, kind, its config keys, rotary positions) is
// config/arch_table.h, which `entry` points to (config sits below models; docs/architecture.md).
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/arch_table.h"
#include "models/model.h"

namespace llmt::config {
struct Config;
struct ModelConfig;
}  // namespace llmt::config

namespace llmt::models {

struct HfConfig;
struct HfExportInfo;

struct ArchSpec {
    const config::ArchEntry* entry = nullptr;  // name, kind, config keys, rotary positions
    // config.json: the model_type values read as this family (empty: the family has no config.json), and
    // the class written to "architectures".
    std::vector<std::string> model_types;
    std::string hf_class;
    // Fills `c` from config.json `j` (file `path`): the shape fields, the family's keys (c.family_values)
    // and where each came from; FormatError naming the field for what the family cannot compute.
    std::function<void(const nlohmann::json& j, const std::string& path, HfConfig& c)> read_hf_config;
    // Adds the family's fields to an exported config.json (the common ones are written already).
    std::function<void(const config::ModelConfig& m, const HfExportInfo& info, int max_position_embeddings,
                       nlohmann::json& j)>
        write_hf_config;
    // A model directory (model.init_from) must hold config.json: settings the weights do not carry (RoPE).
    bool needs_config_json = false;
    // The model of cfg (allocated, zeros; with shard.on() this rank's chunks of its units only), its memory
    // plan for (B, T) without allocating, its training FLOPs per token at context T (Model::flops_per_token)
    // without building it.
    std::function<std::unique_ptr<Model>(const config::Config& cfg, Device device, DType dtype, ParamShard shard)>
        make;
    std::function<MemoryPlan(const config::Config& cfg, Device device, DType dtype, int B, int T)> plan_memory;
    std::function<double(const config::ModelConfig& m, int T)> flops_per_token;
    // PEFT's default target_modules for the family (lora.target_modules empty).
    std::vector<std::string> lora_targets;

    const std::string& name() const { return entry->name; }
};

// Every registered family, in the config table's order.
const std::vector<const ArchSpec*>& arch_specs();
// The family named `name` (model.arch); InputError naming model.arch and the known names otherwise.
const ArchSpec& arch_spec(std::string_view name);
// The family that reads config.json's `model_type`, or nullptr.
const ArchSpec* arch_for_model_type(std::string_view model_type);
// "gpt2, llama or qwen2": every model_type read, in the registry's order, for messages.
std::string hf_model_types_listed();

// The families' specs, each defined in its file.
const ArchSpec& gpt2_arch();
const ArchSpec& llama_arch();
const ArchSpec& qwen2_arch();
const ArchSpec& qwen3_arch();
const ArchSpec& mistral_arch();
const ArchSpec& mlp_arch();
const ArchSpec& cnn_arch();

}  // namespace llmt::models
