// LLaMA (Touvron et al. 2023; the layout of Hugging Face's LlamaForCausalLM): token embedding, pre-RMSNorm
// blocks (causal self-attention with rotary positions and grouped-query heads, SwiGLU MLP), final
// RMSNorm, logits over a padded vocabulary; no biases; tied or untied embeddings. Forward and an explicit
// backward through kernels/ops.h on every backend, like GPT-2 (models/gpt2.h), from the same shared parts
// (ParamStore, Activations, the chunked LM head).
// Two fusions of HF's tensors, split again at the HF boundary (models/hf_adapter.h): q|k|v are one
// projection (qkv_proj: HF's q_proj, k_proj, v_proj rows) and gate|up one (gate_up_proj), so each block
// runs 4 GEMMs instead of 7.
// The families built on this graph (models/qwen2.cpp, ...) are configurations of it: LlamaConfig's
// variant fields (q/k/v biases, ...) switch their parts on.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "models/activations.h"
#include "models/arch.h"
#include "models/language_model.h"
#include "models/rope.h"

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

    // The shared keys of model.*; the family's own (qkv_bias, ...) are its ArchSpec's to set.
    static LlamaConfig from(const config::ModelConfig& m);
    int hd() const { return head_dim > 0 ? head_dim : d_model / n_head; }
    // 6N + 12 L (n_head * head_dim) T, N counting the head's V x C once and not the embedding lookup.
    double flops_per_token(int T) const;
};

class Llama final : public LanguageModel {
public:
    explicit Llama(const LlamaConfig& cfg, Device device = Device::kCpu, DType dtype = DType::kF32);
    static MemoryPlan plan_memory(const LlamaConfig& cfg, Device device, DType dtype, int B, int T);

    const LlamaConfig& config() const { return cfg_; }
    std::string_view arch() const override { return cfg_.arch; }
    std::string summary() const override;
    // N(0, 0.02) for every matrix and the embedding (HF's initializer_range), ones for the norms.
    void init_base(uint64_t seed) override;
    float forward(const int32_t* inputs, const int32_t* targets, int B, int T, bool train, float loss_scale = 1.f,
                  const int32_t* positions = nullptr) override;
    void backward() override;
    MemoryPlan memory_plan(int B, int T) const override;
    double flops_per_token(int T) const override { return cfg_.flops_per_token(T); }
    std::unique_ptr<Decoder> decoder(int max_T = 0) const override;
    // Ignores HF's non-persistent rotary buffers (rotary_emb.inv_freq in old files) and a stored
    // lm_head.weight when tied.
    std::string hf_canonical_name(const std::string& name) const override;

    struct Layer {
        ParamId attn_norm, qkv, o, mlp_norm, gate_up, down;
        ParamId qkv_bias = 0;        // with LlamaConfig::qkv_bias only
        ParamId q_norm = 0, k_norm = 0;  // with LlamaConfig::qk_norm only
    };
    struct Weights {
        ParamId embed, norm, head;  // head == embed when tied
        std::vector<Layer> layers;
    };
    const Weights& weights() const { return w_; }
    // The RoPE table (block_size, head_dim), on the model's device.
    Tensor rope() const { return rope_.view(size_t{0}); }

private:
    struct LayoutOnly {};
    Llama(const LlamaConfig& cfg, Device device, DType dtype, LayoutOnly);

    // kQkvRaw, kQkRstd: the projection's output before the per-head norms and their statistics (qk_norm only).
    enum LayerAct { kAttnNorm, kAttnRstd, kQkv, kAtty, kLse, kResMid, kMlpNorm, kMlpRstd, kGateUp, kSwiglu, kResOut,
                    kQkvRaw, kQkRstd, kNumLayerActs };
    struct Acts {
        ActId embedded, norm, norm_rstd, logits, losses, d_residual, d_c, d_qkv, d_att, d_f, d_gu, inputs, targets,
            positions;
        std::vector<std::array<ActId, kNumLayerActs>> layer;
    };
    Arena activation_layout(int B, int T, Acts* ids = nullptr) const;
    bool kept_per_layer(LayerAct a) const;
    // Layer l's block on `residual`; to_res_out false stops before the down projection (recompute all).
    void block_forward(int l, Tensor residual, bool to_res_out);
    int64_t qkv_width() const { return static_cast<int64_t>(cfg_.n_head + 2 * cfg_.n_kv_head) * cfg_.hd(); }
    // q|k|v's bias (with qkv_bias), else empty: the GEMM's epilogue adds it.
    Tensor qkv_bias(const Layer& L) const { return cfg_.qkv_bias ? store_.weight(L.qkv_bias) : Tensor(); }
    int64_t att_width() const { return static_cast<int64_t>(cfg_.n_head) * cfg_.hd(); }
    Tensor act(int l, LayerAct a, int64_t width) const { return acts_.btc(ids_.layer[l][a], B_, T_, width); }
    Tensor stat(int l, LayerAct a) const { return acts_.bt(ids_.layer[l][a], B_, T_); }
    Tensor qk_rstd(int l) const { return acts_.shaped(ids_.layer[l][kQkRstd], {B_, T_, cfg_.n_head + cfg_.n_kv_head}); }

    LlamaConfig cfg_;
    Weights w_;
    Acts ids_;
    Activations acts_;
    Arena rope_;  // (block_size, head_dim) f32 on the device
    Tensor positions_;  // of the last forward (packed examples), or empty
    bool has_grad_ = false;
};

// For the families on this graph (models/qwen2.cpp, ...): the LlamaConfig of a config (shared keys,
// trainer.recompute, lora.*), and an ArchSpec building Llama models whose config `variant` adjusts (its
// model_types {name}, config.json required, PEFT's default targets); the family adds its config.json.
LlamaConfig llama_graph_config(const config::Config& cfg);
ArchSpec llama_graph_spec(const std::string& name, const std::function<void(LlamaConfig&)>& variant);

}  // namespace llmt::models
