// GPT-2 (Radford et al. 2019; the layout of Hugging Face's GPT2LMHeadModel): token + position
// embeddings, pre-LayerNorm blocks (causal self-attention, GELU-tanh MLP), final LayerNorm, logits over
// a vocabulary padded to a multiple of 64/128 (padding never predicted). Forward and an explicit
// backward in llm.c style, all through kernels/ops.h, so the same code drives every backend.
// Parameters carry Hugging Face's names (transformer.h.<l>....; Conv1D weights stored transposed there).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "models/activations.h"
#include "models/language_model.h"

namespace llmt::config {
struct ModelConfig;
}

namespace llmt::models {

struct Gpt2Config {
    int n_layer = 0, n_head = 0, d_model = 0, d_ff = 0;
    int block_size = 0;  // maximum T
    int vocab_size = 0;  // V: ids and targets are < V
    int padded_vocab = 0;  // Vp >= V: width of wte / logits
    bool tie_embeddings = true;
    float norm_eps = 1e-5f;
    // Dropout probability in training (GPT-2's embd_pdrop and resid_pdrop: after the embeddings and on
    // both residual branches). Attention-probability dropout (attn_pdrop) is not applied: the tiled
    // attention never materialises the probabilities. 0 disables it (and costs nothing).
    float dropout = 0.f;
    // Activation memory for compute (trainer.recompute; not a model property: it changes no result).
    Recompute recompute = Recompute::kNone;
    LoraSpec lora;  // r 0: none

    static Gpt2Config from(const config::ModelConfig& m);
    // 6N + 12 L C T: training FLOPs per token (PaLM appendix B), N counting tied weights once.
    double flops_per_token(int T) const;
};

class Gpt2 final : public LanguageModel {
public:
    // Parameters, gradients and activations live on `device`; `dtype` is the compute precision: f32, or
    // bf16 (CUDA only: fp32 master weights and gradients, a bf16 copy the kernels read, bf16 activations).
    explicit Gpt2(const Gpt2Config& cfg, Device device = Device::kCpu, DType dtype = DType::kF32);
    // The memory plan of a model not built: nothing is allocated, so a model too large for the device
    // can be refused with its figures. Throws InputError as the constructor does.
    static MemoryPlan plan_memory(const Gpt2Config& cfg, Device device, DType dtype, int B, int T);

    const Gpt2Config& config() const { return cfg_; }
    std::string_view arch() const override { return "gpt2"; }
    std::string summary() const override;
    // N(0, 0.02) for weights and embeddings, N(0, 0.02/sqrt(2L)) for the two residual projections, zeros
    // for biases, ones for LayerNorm weights; padding rows of wte are 0.
    void init_base(uint64_t seed) override;
    float forward(const int32_t* inputs, const int32_t* targets, int B, int T, bool train, float loss_scale = 1.f,
                  const int32_t* positions = nullptr) override;
    // Dropout masks are stateless (kernels/cpu/dropout.h): site k (0 = embeddings, 1 + 2l / 2 + 2l = layer
    // l's attention / MLP branch) uses the dropout seed + k, so resume reproduces them exactly.
    void backward() override;
    MemoryPlan memory_plan(int B, int T) const override;
    double flops_per_token(int T) const override { return cfg_.flops_per_token(T); }
    std::unique_ptr<Decoder> decoder(int max_T = 0) const override;
    // Hub files spell the names without "transformer." and carry the attention-mask buffers
    // (attn.bias, attn.masked_bias): ignored, as is a stored lm_head.weight when tied.
    std::string hf_canonical_name(const std::string& name) const override;

    // Typed handles into the parameter table.
    struct Layer {
        ParamId ln1_w, ln1_b, qkv_w, qkv_b, attn_proj_w, attn_proj_b, ln2_w, ln2_b, fc_w, fc_b, mlp_proj_w, mlp_proj_b;
    };
    struct Weights {
        ParamId wte, wpe, lnf_w, lnf_b, head;  // head == wte when tied
        std::vector<Layer> layers;
    };
    const Weights& weights() const { return w_; }
    Tensor weight(ParamId id) const { return store_.weight(id); }

private:
    struct LayoutOnly {};
    Gpt2(const Gpt2Config& cfg, Device device, DType dtype, LayoutOnly);

    // Each layer's activations, in arena order.
    enum LayerAct { kLn1, kLn1Mean, kLn1Rstd, kQkv, kAtty, kLse, kAttProj, kResidual2, kLn2, kLn2Mean, kLn2Rstd,
                    kFch, kFchGelu, kFcProj, kResidual3, kNumLayerActs };
    struct Acts {
        ActId encoded, lnf, lnf_mean, lnf_rstd, logits, losses, d_residual, d_c, d_c2, d_qkv, d_f, inputs, targets;
        std::vector<std::array<ActId, kNumLayerActs>> layer;  // per layer; shared buffers repeat an id
    };
    // The activation arena for (B, T), not allocated; `ids` (optional) receives the handles.
    Arena activation_layout(int B, int T, Acts* ids = nullptr) const;
    // Whether activation `a` is kept per layer (else one shared buffer, recomputed in backward), and
    // whether it exists at all (the projections' outputs only with dropout).
    bool kept_per_layer(LayerAct a) const;
    bool present(LayerAct a) const;
    // Layer l's block on `residual` (the last forward's B, T); to_residual3 false stops before the MLP's
    // output projection (what backward needs when it re-runs the block, trainer.recompute all).
    void block_forward(int l, Tensor residual, bool to_residual3);
    Tensor act(int l, LayerAct a, int64_t width) const { return acts_.btc(ids_.layer[l][a], B_, T_, width); }
    Tensor stat(int l, LayerAct a) const { return acts_.bt(ids_.layer[l][a], B_, T_); }

    Gpt2Config cfg_;
    Weights w_;
    Acts ids_;
    Activations acts_;
    bool has_grad_ = false;  // the last forward prepared the head's gradient
    bool dropped_ = false;   // the last forward applied dropout (backward must too)
};

}  // namespace llmt::models
