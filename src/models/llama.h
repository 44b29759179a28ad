// LLaMA (Touvron et al. 2023; the layout of Hugging Face's LlamaForCausalLM): token embedding, pre-RMSNorm
// blocks (causal self-attention with rotary positions and grouped-query heads, SwiGLU MLP), final
// RMSNorm, logits over a padded vocabulary; no biases; tied or untied embeddings. The graph is the shared
// transformer's (models/transformer.h), as GPT-2's is (models/gpt2.h); this file's part is the config and
// the table.
// Two fusions of HF's tensors, split again at the HF boundary (models/hf_adapter.h): q|k|v are one
// projection (qkv_proj: HF's q_proj, k_proj, v_proj rows) and gate|up one (gate_up_proj), so each block
// runs 4 GEMMs instead of 7.
// The families built on this graph (models/qwen2.cpp, ...) are configurations of it: LlamaConfig's
// variant fields (q/k/v biases, ...) switch the blocks' parts on (models/block_config.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "models/arch.h"
#include "models/rope.h"
#include "models/transformer.h"

namespace llmt::config {
struct Config;
struct ModelConfig;
}  // namespace llmt::config

namespace llmt::models {

struct LlamaConfig {
    std::string arch = "llama";  // the family on this graph (Model::arch): llama, qwen2, ...
    int n_layer = 0, n_head = 0, n_kv_head = 0, d_model = 0, d_ff = 0;
    int head_dim = 0;    // 0: d_model / n_head
    int block_size = 0;  // maximum T (the training context; may be below HF's max_position_embeddings)
    int vocab_size = 0, padded_vocab = 0;
    bool tie_embeddings = false;
    float norm_eps = 1e-5f;  // RMSNorm eps (HF rms_norm_eps)
    double rope_theta = 10000.0;
    RopeScaling rope_scaling;
    bool qkv_bias = false;  // Qwen2: biases on q, k and v (HF q_proj.bias, k_proj.bias, v_proj.bias)
    // Qwen3: RMSNorm over each query and key head (HF q_norm / k_norm, head_dim wide) before RoPE.
    bool qk_norm = false;
    // Mistral: query t attends keys t - sliding_window < j <= t only; 0 = no window.
    int sliding_window = 0;
    Recompute recompute = Recompute::kNone;
    LoraSpec lora;  // r 0: none
    ParamShard shard;  // ZeRO-3: this rank's chunks of the units only

    // The keys of model.* every family on this graph reads (the shared ones and the RoPE section); the
    // family's own (qkv_bias, its config section: Mistral's window, ...) are its ArchSpec's to set.
    static LlamaConfig from(const config::ModelConfig& m);
    int hd() const { return head_dim > 0 ? head_dim : d_model / n_head; }
    // 6N + 12 L (n_head * head_dim) T, N counting the head's V x C once and not the embedding lookup.
    double flops_per_token(int T) const;
};

// LLaMA is a Transformer (models/transformer.h) configured as RMSNorm, RoPE, grouped-query attention and a
// SwiGLU MLP without biases, plus LlamaConfig's variant parts; this class is its tensor table.
class Llama final : public Transformer {
public:
    explicit Llama(const LlamaConfig& cfg, Device device = Device::kCpu, DType dtype = DType::kF32);
    static MemoryPlan plan_memory(const LlamaConfig& cfg, Device device, DType dtype, int B, int T);

    const LlamaConfig& config() const { return cfg_; }
    std::string summary() const override;
    // N(0, 0.02) for every matrix and the embedding (HF's initializer_range), ones for the norms.
    void init_base(uint64_t seed) override;
    double flops_per_token(int T) const override { return cfg_.flops_per_token(T); }
    // Ignores HF's non-persistent rotary buffers (rotary_emb.inv_freq in old files) and a stored
    // lm_head.weight when tied.
    std::string hf_canonical_name(const std::string& name) const override;

private:
    struct LayoutOnly {};
    Llama(const LlamaConfig& cfg, Device device, DType dtype, LayoutOnly);

    LlamaConfig cfg_;
};

// For the families on this graph (models/qwen2.cpp, ...): the LlamaConfig of a config (shared keys,
// trainer.recompute, lora.*), and an ArchSpec building Llama models whose config `variant` adjusts from
// the model section (the family's own parts and keys; its model_types {name}, config.json required, PEFT's
// default targets); the family adds its config.json.
using LlamaVariant = std::function<void(const config::ModelConfig& m, LlamaConfig& c)>;
LlamaConfig llama_graph_config(const config::Config& cfg);
ArchSpec llama_graph_spec(const std::string& name, const LlamaVariant& variant);

}  // namespace llmt::models
