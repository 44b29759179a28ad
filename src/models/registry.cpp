#include "models/registry.h"

#include <fmt/format.h>

#include "core/error.h"
#include "models/classifier.h"
#include "models/gpt2.h"
#include "models/llama.h"

namespace llmt::models {

namespace {

// lora.* as the model layer takes it; no target_modules means PEFT's default for the architecture.
LoraSpec lora_spec(const config::Config& cfg) {
    const config::LoraConfig& l = cfg.lora;
    LoraSpec s;
    s.r = l.r;
    s.alpha = l.alpha;
    s.rslora = l.use_rslora;
    s.dropout = l.dropout;
    s.target_modules = l.target_modules;
    if (s.target_modules.empty())
        s.target_modules = cfg.model.arch == "gpt2" ? std::vector<std::string>{"c_attn"}
                                                    : std::vector<std::string>{"q_proj", "v_proj"};
    return s;
}

Gpt2Config gpt2_config(const config::Config& cfg) {
    Gpt2Config c = Gpt2Config::from(cfg.model);
    c.recompute = recompute_from_name(cfg.trainer.recompute);
    c.lora = lora_spec(cfg);
    return c;
}

LlamaConfig llama_config(const config::Config& cfg) {
    LlamaConfig c = LlamaConfig::from(cfg.model);
    c.recompute = recompute_from_name(cfg.trainer.recompute);
    c.lora = lora_spec(cfg);
    return c;
}

[[noreturn]] void unknown_arch(const std::string& arch) {
    throw InputError(fmt::format("model.arch: '{}' is not a model this build can train (expected gpt2, llama, mlp or cnn)", arch));
}

}  // namespace

std::unique_ptr<Model> make_model(const config::Config& cfg, Device device, DType dtype) {
    if (cfg.model.arch == "gpt2") return std::make_unique<Gpt2>(gpt2_config(cfg), device, dtype);
    if (cfg.model.arch == "llama") return std::make_unique<Llama>(llama_config(cfg), device, dtype);
    if (cfg.model.is_classifier()) return std::make_unique<Classifier>(ClassifierConfig::from(cfg), device, dtype);
    unknown_arch(cfg.model.arch);
}

MemoryPlan plan_model_memory(const config::Config& cfg, Device device, DType dtype, int B, int T) {
    if (cfg.model.arch == "gpt2") return Gpt2::plan_memory(gpt2_config(cfg), device, dtype, B, T);
    if (cfg.model.arch == "llama") return Llama::plan_memory(llama_config(cfg), device, dtype, B, T);
    if (cfg.model.is_classifier())
        return Classifier(ClassifierConfig::from(cfg), device, dtype, /*allocate=*/false).memory_plan(B, T);
    unknown_arch(cfg.model.arch);
}

double model_flops_per_token(const config::ModelConfig& m, int T) {
    if (m.arch == "gpt2") return Gpt2Config::from(m).flops_per_token(T);
    if (m.arch == "llama") return LlamaConfig::from(m).flops_per_token(T);
    if (m.is_classifier()) {  // per pixel ("token") of an image, as Classifier::flops_per_token
        config::Config c;
        c.model = m;
        const ClassifierConfig cc = ClassifierConfig::from(c);
        return cc.train_flops_per_image() / static_cast<double>(cc.H * cc.W * cc.C);
    }
    unknown_arch(m.arch);
}

}  // namespace llmt::models
