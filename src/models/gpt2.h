// GPT-2 (Radford et al. 2019; the layout of Hugging Face's GPT2LMHeadModel): token + position
// embeddings, pre-LayerNorm blocks (causal self-attention, GELU-tanh MLP), final LayerNorm, logits over
// a vocabulary padded to a multiple of 64/128 (padding never predicted). The graph is the shared
// transformer's (models/transformer.h: forward, explicit backward, KV-cache decoder, all through
// kernels/ops.h, so the same code drives every backend); this file's part is the config and the table.
// Parameters carry Hugging Face's names (transformer.h.<l>....; Conv1D weights stored transposed there).
#pragma once

#include <cstdint>
#include <string>

#include "models/transformer.h"

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
    ParamShard shard;  // ZeRO-3: this rank's chunks of the units only

    static Gpt2Config from(const config::ModelConfig& m);
    // 6N + 12 L C T: training FLOPs per token (PaLM appendix B), N counting tied weights once.
    double flops_per_token(int T) const;
};

// GPT-2 is a Transformer (models/transformer.h) configured as LayerNorm, biases on every projection,
// learned positions, multi-head attention and a GELU MLP; this class is its tensor table.
class Gpt2 final : public Transformer {
public:
    // Parameters, gradients and activations live on `device`; `dtype` is the compute precision: f32, or
    // bf16 (CUDA only: fp32 master weights and gradients, a bf16 copy the kernels read, bf16 activations).
    explicit Gpt2(const Gpt2Config& cfg, Device device = Device::kCpu, DType dtype = DType::kF32);
    // The memory plan of a model not built: nothing is allocated, so a model too large for the device
    // can be refused with its figures. Throws InputError as the constructor does.
    static MemoryPlan plan_memory(const Gpt2Config& cfg, Device device, DType dtype, int B, int T);

    const Gpt2Config& config() const { return cfg_; }
    std::string summary() const override;
    // N(0, 0.02) for weights and embeddings, N(0, 0.02/sqrt(2L)) for the two residual projections, zeros
    // for biases, ones for LayerNorm weights; padding rows of wte are 0.
    void init_base(uint64_t seed) override;
    double flops_per_token(int T) const override { return cfg_.flops_per_token(T); }
    // Hub files spell the names without "transformer." and carry the attention-mask buffers
    // (attn.bias, attn.masked_bias): ignored, as is a stored lm_head.weight when tied.
    std::string hf_canonical_name(const std::string& name) const override;

private:
    struct LayoutOnly {};
    Gpt2(const Gpt2Config& cfg, Device device, DType dtype, LayoutOnly);

    Gpt2Config cfg_;
};

}  // namespace llmt::models
