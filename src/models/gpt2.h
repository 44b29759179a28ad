// GPT-2 (Radford et al. 2019; the layout of Hugging Face's GPT2LMHeadModel): token + position
// embeddings, pre-LayerNorm blocks (causal self-attention, GELU-tanh MLP), final LayerNorm, logits over
// a vocabulary padded to a multiple of 64/128 (padding never predicted). Forward and an explicit
// backward in llm.c style, all through kernels/ops.h, so the same code drives every backend.
// Parameters live in one arena named with Hugging Face's names (models/gpt2_params.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/arena.h"
#include "models/param_spec.h"

namespace llmt::config {
struct ModelConfig;
}

namespace llmt::models {

// trainer.recompute: which activations backward() recomputes instead of keeping from the forward.
// kGelu: the MLP's GELU output, recomputed from its kept pre-activation (one layer's worth of buffer, shared).
// kAll: everything inside a block; only each block's input and output on the residual stream are kept,
// and backward re-runs the block's forward into one block's worth of scratch right before its backward.
enum class Recompute { kNone, kGelu, kAll };
// "none" | "gelu" | "all" (the schema's choices); InputError naming trainer.recompute otherwise.
Recompute recompute_from_name(const std::string& name);

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

    static Gpt2Config from(const config::ModelConfig& m);
    // 6N + 12 L C T: training FLOPs per token (PaLM appendix B), N counting tied weights once.
    double flops_per_token(int T) const;
};

// Not thread-safe: one model per training process. forward/backward use OpenMP inside the kernels.
class Gpt2 {
public:
    // Parameters, gradients and activations live on `device` (CUDA: arenas in GPU memory; the model code
    // is the same, kernels/ops.h dispatches on the tensors' device). `dtype` is the compute precision:
    // f32, or bf16 (CUDA only: mixed precision with fp32 master weights and gradients, a bf16 copy of
    // the weights that the kernels read, bf16 activations; the loss is fp32).
    explicit Gpt2(const Gpt2Config& cfg, Device device = Device::kCpu, DType dtype = DType::kF32);
    Device device() const { return device_; }
    DType dtype() const { return dtype_; }

    const Gpt2Config& config() const { return cfg_; }
    const std::vector<ParamSpec>& param_specs() const { return specs_; }
    Arena& params() { return params_; }
    Arena& grads() { return grads_; }
    const Arena& params() const { return params_; }
    // Number of parameters (tied weights once; the padding rows of wte not counted).
    int64_t num_parameters() const;
    // bf16: the compute copy of the parameters as one flat bf16 tensor indexed like params() (element i of
    // the arena, alignment gaps included), which the optimizer rewrites after each update; empty for f32.
    Tensor compute_params() const;
    // Refreshes the compute copy from params() (call after writing params() other than through the
    // optimizer: loading a checkpoint). No-op for f32.
    void sync_compute_params();

    // GPT-2 initialisation: N(0, 0.02) for weights and embeddings, N(0, 0.02/sqrt(2L)) for the two
    // residual projections, zeros for biases, ones for LayerNorm weights; padding rows of wte are 0.
    void init_random(uint64_t seed);

    // Mean cross-entropy of `targets` given `inputs` (both (B,T) i32, B*T each; a target < 0 is
    // ignored). When `train` is true the gradient of the loss times `loss_scale` is prepared for
    // backward() (dlogits are computed in the same pass as the loss). Throws InputError for T >
    // block_size or an id outside [0, V). Activations are sized on first use and regrown if B*T grows.
    float forward(const int32_t* inputs, const int32_t* targets, int B, int T, bool train, float loss_scale = 1.f);
    // Accumulates (+=) the gradients of the last train forward into grads(). Call zero_grad() per step.
    // Re-runs what config().recompute did not keep (the same kernels on the same inputs as the forward).
    void backward();
    void zero_grad() { grads_.zero(); }
    // Seed of the dropout masks of the next train forward (and its backward). The masks are stateless
    // (kernels/cpu/dropout.h): site k (0 = embeddings, 1 + 2l / 2 + 2l = layer l's attention / MLP
    // branch) uses seed + k, so the trainer derives one seed per (step, micro-step, rank) and resume
    // reproduces the masks exactly.
    void set_dropout_seed(uint64_t seed) { dropout_seed_ = seed; }
    // Called during backward() with a byte offset into the gradient arena each time every gradient at
    // and after it is final: after the final LayerNorm, after each layer (in reverse), 0 at the end.
    // The data-parallel Reducer starts all-reducing those buckets while backward goes on.
    void set_grads_ready_hook(std::function<void(size_t byte_offset)> hook) { grads_ready_ = std::move(hook); }

    // Logits of the last position of every row after forward(..., targets = nullptr): (B, Vp). CPU models
    // only (InternalError otherwise).
    // Used by sampling; columns >= V are padding.
    const float* last_logits(int b) const;

    // Per-layer hook for sampling/eval without targets: logits of all positions (B,T,Vp).
    const float* logits() const;

    // Memory plan: bytes of parameters, gradients and activations for (B, T); the activations shrink with
    // config().recompute.
    struct MemoryPlan {
        size_t params = 0, grads = 0, activations = 0;
    };
    MemoryPlan memory_plan(int B, int T) const;
    // The same plan for a model not built: nothing is allocated, so a model too large for the device
    // can be refused with its figures (train/memory_check.h). Throws InputError as the constructor does,
    // and when a size overflows 64 bits.
    static MemoryPlan plan_memory(const Gpt2Config& cfg, Device device, DType dtype, int B, int T);

private:
    struct LayoutOnly {};
    // Checks cfg, lists the parameters and lays out the arenas without allocating them.
    Gpt2(const Gpt2Config& cfg, Device device, DType dtype, LayoutOnly);
    void ensure_activations(int B, int T);
    // Layer l's block on the residual stream `residual` (B_, T_ of the last forward): LayerNorms,
    // attention and MLP into the layer's activation buffers; with `to_residual3` false it stops before
    // the MLP's output projection (what backward needs when it re-runs the block, trainer.recompute all).
    void block_forward(int l, Tensor residual, bool to_residual3);
    // Whether activation `name` (one of each layer's) is kept per layer, else in one shared "blk." buffer.
    bool kept_per_layer(const std::string& name) const;
    // Layer l's buffer of activation `name`: "h<l>.<name>", or the shared "blk.<name>".
    std::string act_name(int l, const std::string& name) const;

    // The activation arena's layout for (B, T) (not allocated).
    Arena activation_layout(int B, int T) const;
    // Parameter `name` as the kernels read it: the fp32 master view, or its bf16 compute copy.
    Tensor weight(const std::string& name) const;

    Gpt2Config cfg_;
    Device device_ = Device::kCpu;
    DType dtype_ = DType::kF32;
    std::vector<ParamSpec> specs_;
    Arena params_, grads_;
    Arena params_lp_;  // bf16 compute copy (one flat view), allocated only for dtype bf16
    Arena acts_;
    int act_B_ = 0, act_T_ = 0;  // the (B, T) of the allocated activation arena
    int B_ = 0, T_ = 0;          // of the last forward
    bool has_grad_ = false;      // the last forward prepared dlogits
    bool dropped_ = false;       // the last forward applied dropout (backward must too)
    uint64_t dropout_seed_ = 0;
    std::function<void(size_t)> grads_ready_;
    std::vector<int32_t> inputs_;
};

}  // namespace llmt::models
