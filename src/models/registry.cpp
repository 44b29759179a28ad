#include "models/registry.h"

#include <fmt/format.h>

#include "core/check.h"
#include "core/error.h"
#include "models/arch.h"

namespace llmt::models {

const std::vector<const ArchSpec*>& arch_specs() {
    // One line per family; the config table (config/arch_table.h) lists the same names in the same order.
    static const std::vector<const ArchSpec*> specs = {&gpt2_arch(),    &llama_arch(), &qwen2_arch(), &qwen3_arch(),
                                                       &mistral_arch(), &mlp_arch(),   &cnn_arch()};
    return specs;
}

const ArchSpec& arch_spec(std::string_view name) {
    for (const ArchSpec* s : arch_specs())
        if (s->name() == name) return *s;
    std::string names;
    for (const ArchSpec* s : arch_specs()) names += (names.empty() ? "" : ", ") + s->name();
    throw InputError(fmt::format("model.arch: '{}' is not a model this build can train (expected one of {})", name,
                                 names));
}

const ArchSpec* arch_for_model_type(std::string_view model_type) {
    for (const ArchSpec* s : arch_specs())
        for (const auto& t : s->model_types)
            if (t == model_type) return s;
    return nullptr;
}

std::string hf_model_types_listed() {
    std::vector<std::string> types;
    for (const ArchSpec* s : arch_specs()) types.insert(types.end(), s->model_types.begin(), s->model_types.end());
    std::string out;
    for (std::size_t i = 0; i < types.size(); ++i)
        out += (i == 0 ? "" : i + 1 == types.size() ? " or " : ", ") + types[i];
    return out;
}

LoraSpec lora_spec(const config::Config& cfg) {
    const config::LoraConfig& l = cfg.lora;
    LoraSpec s;
    s.r = l.r;
    s.alpha = l.alpha;
    s.rslora = l.use_rslora;
    s.dropout = l.dropout;
    s.target_modules = l.target_modules;
    if (s.target_modules.empty()) s.target_modules = arch_spec(cfg.model.arch).lora_targets;
    return s;
}

std::unique_ptr<Model> make_model(const config::Config& cfg, Device device, DType dtype, ParamShard shard) {
    return arch_spec(cfg.model.arch).make(cfg, device, dtype, shard);
}

MemoryPlan plan_model_memory(const config::Config& cfg, Device device, DType dtype, int B, int T) {
    return arch_spec(cfg.model.arch).plan_memory(cfg, device, dtype, B, T);
}

double model_flops_per_token(const config::ModelConfig& m, int T) {
    return arch_spec(m.arch).flops_per_token(m, T);
}

}  // namespace llmt::models
