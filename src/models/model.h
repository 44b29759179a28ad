// The model interface: what the trainer, `eval`, `export` and the server's estimator need from an
// architecture, whatever it is (what only language models have, decoding and HF names, is
// models/language_model.h). An architecture (models/gpt2.h, models/llama.h) is a parameter
// table (ParamStore) plus a forward and an explicit backward written with kernels/ops.h, and an HF name
// map in its table; models/registry.h builds one from the config. Not thread-safe: one model per
// training process (the kernels use OpenMP inside).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/arena.h"
#include "models/activations.h"
#include "models/lora.h"
#include "models/param_store.h"
#include "models/unit_gather.h"

namespace llmt::models {

// trainer.recompute: which activations backward() recomputes instead of keeping from the forward.
// kMlp: the MLP's activation output (GPT-2's GELU, LLaMA's SwiGLU), recomputed from its kept input.
// kAll: everything inside a block; only each block's input and output on the residual stream are kept,
// and backward re-runs the block's forward into one block's worth of scratch right before its backward.
enum class Recompute { kNone, kMlp, kAll };
// "none" | "gelu" (the MLP activation, whichever it is) | "all"; InputError naming trainer.recompute otherwise.
Recompute recompute_from_name(const std::string& name);

// Bytes of parameters (with the bf16 copy), gradients and activations for (B, T).
struct MemoryPlan {
    size_t params = 0, grads = 0, activations = 0;
};

// Shape facts every architecture has.
struct ModelDims {
    int n_layer = 0, d_model = 0;
    int block_size = 0;    // maximum T
    int vocab_size = 0;    // V: ids and targets are < V
    int padded_vocab = 0;  // Vp >= V: rows of the embedding and logit tables
};

class Classifier;
class LanguageModel;

class Model {
public:
    virtual ~Model() = default;

    virtual std::string_view arch() const = 0;
    // One line for logs: "llama, 16 layers, d_model 2048, 32 heads (8 kv), ...".
    virtual std::string summary() const = 0;
    const ModelDims& dims() const { return dims_; }
    Device device() const { return store_.device(); }
    DType dtype() const { return store_.dtype(); }

    // The trained parameters (models/param_store.h): what the optimizer, the Reducer and checkpoints
    // see. The model's own weights, or under LoRA the adapters (the base store is then frozen).
    ParamStore& trained() { return lora_ ? lora_->store() : store_; }
    const ParamStore& trained() const { return lora_ ? lora_->store() : store_; }
    const std::vector<ParamSpec>& param_specs() const { return trained().specs(); }
    Arena& params() { return trained().params(); }
    Arena& grads() { return trained().grads(); }
    const Arena& params() const { return trained().params(); }
    Tensor compute_params() const { return trained().compute_params(); }
    void sync_compute_params() { trained().sync_compute_params(); }
    // The architecture's own weights (HF's tensors), whether trained or frozen.
    ParamStore& base() { return store_; }
    const ParamStore& base() const { return store_; }
    // The LoRA adapters, or null.
    const LoraAdapters* lora() const { return lora_.get(); }
    LoraAdapters* lora() { return lora_.get(); }
    // Parameters as Hugging Face counts them (the base model's).
    int64_t num_parameters() const { return store_.num_parameters(); }
    // The architecture's initialisation (its stds; padding rows 0); the adapters' (A Kaiming-uniform, B 0)
    // from the same seed.
    void init_random(uint64_t seed) {
        init_base(seed);
        init_adapters(seed);
    }
    // Fresh adapters (A Kaiming-uniform, B zero) from `seed`, on a stream apart from the base's; no-op
    // without LoRA.
    void init_adapters(uint64_t seed) {
        if (lora_) lora_->init_random(seed ^ 0x4c6f5241ull);  // "LoRA"
    }
    // Folds the adapters into the base weights (W += scale B A per adapted part, in fp32, stored in the
    // base's dtype) and removes them: the model is then a plain one (models/lora.h). No-op without LoRA.
    void merge_adapters();

    // Mean cross-entropy of `targets` given `inputs` (both (B,T) i32; a target < 0 is ignored). With
    // `train` the gradient of the loss times `loss_scale` is prepared for backward(). Without targets the
    // logits of every position are computed (logits()). InputError for T > block_size or an id outside [0, V).
    // positions (optional, (B,T) i32): HF's position_ids of packed examples (0 at each example's first token,
    // then +1): RoPE uses them and attention does not cross examples. InputError for positions that break
    // that rule; architectures without rotary positions refuse them.
    virtual float forward(const int32_t* inputs, const int32_t* targets, int B, int T, bool train,
                          float loss_scale = 1.f, const int32_t* positions = nullptr) = 0;
    // Accumulates (+=) the gradients of the last train forward into grads(). Call zero_grad() per step.
    virtual void backward() = 0;
    void zero_grad() { trained().grads().zero(); }
    // Seed of the dropout masks of the next train forward (and its backward); architectures without
    // dropout ignore it (their config refuses model.dropout > 0).
    void set_dropout_seed(uint64_t seed) { dropout_seed_ = seed; }
    // Called during backward() with a byte offset into the gradient arena each time every gradient at and
    // after it is final (0 at the end). The data-parallel Reducer all-reduces those buckets meanwhile.
    void set_grads_ready_hook(std::function<void(size_t byte_offset)> hook) { grads_ready_ = std::move(hook); }
    // ZeRO-3 (models/unit_gather.h): where the first tensor of each unit of the table is (ascending, from 0),
    // or empty for an architecture that cannot shard its parameters per unit. A model whose store shards
    // those groups (ParamShard) calls `gather` around each unit's use; not owned, must outlive the model's
    // use.
    virtual std::vector<ParamId> shard_units() const { return {}; }
    void set_unit_gather(UnitGather* gather) { gather_ = gather; }
    // Logits (B,T,Vp) of every position after forward(..., targets = nullptr), in host memory (language
    // models on any device, through lm_head_logits; the classifier copies its (B,classes) logits over).
    const float* logits() const;

    virtual MemoryPlan memory_plan(int B, int T) const = 0;
    // Training FLOPs per token at context T: 6N + the attention's 12 L H T (PaLM appendix B), N without
    // the embedding lookups' (free) FLOPs where the architecture says so.
    virtual double flops_per_token(int T) const = 0;
    // What a training step does per token: flops_per_token, or under LoRA without the frozen weights'
    // gradient GEMMs (6N -> 4N) plus the adapters' 6 N_adapters. The MFU the trainer prints uses it.
    double train_flops_per_token(int T) const {
        if (!lora_) return flops_per_token(T);
        const double six_n = flops_per_token(0);  // 6N: the attention term is 0 at T = 0
        return flops_per_token(T) - six_n / 3 + 6.0 * static_cast<double>(lora_->store().num_parameters());
    }

    // This model as a language model (decoding, Hugging Face names; models/language_model.h), or null for
    // one that is not (an image classifier).
    virtual const LanguageModel* language_model() const { return nullptr; }
    // This model as an image classifier (models/classifier.h: image sets bound to it, classification of
    // them), or null for one that is not (a language model).
    virtual Classifier* image_classifier() { return nullptr; }

protected:
    Model() = default;
    virtual void init_base(uint64_t seed) = 0;
    // Lays out the base store (frozen under LoRA) and the adapters; allocate_params() allocates both.
    void layout_params(const LoraSpec& lora, Device device, DType dtype);
    void allocate_params();
    // Bytes of parameters, gradients and the adapters' activations for (B, T), on top of an
    // architecture's own activations.
    MemoryPlan params_memory_plan(int B, int T) const;
    // A linear layer: out = inp @ W^T + bias [+ residual], plus the LoRA delta when W is adapted.
    void linear_forward(Tensor out, Tensor inp, ParamId w, Tensor bias = {}, Tensor residual = {});
    // Its backward: dinp = (then += the adapters' share), W's gradient += unless frozen, dbias += (may be
    // empty), the adapters' gradients +=.
    void linear_backward(Tensor dinp, Tensor dout, Tensor inp, ParamId w, Tensor dbias = {});
    // The gradient of base tensor `id`, or, when the base is frozen, scratch buffer `slot` (0 or 1) of its
    // shape that the kernels may write and nobody reads (norm weights and biases: the norm kernels always
    // produce them).
    Tensor grad_or_sink(ParamId id, int slot = 0);
    // Shared by every architecture's forward: validates (B, T) and the ids, sizes the activations for them
    // (`layout`), records B_ and T_, copies the ids to the device (the arena's "inputs"/"targets" views,
    // i32) and counts the targets.
    struct Batch {
        int64_t counted = 0;  // targets >= 0
        Tensor positions;     // (B,T) i32 on the device (the arena's "positions"), or empty
    };
    // positions: checked on the host (each row's first 0, then 0 or the previous + 1) and copied to the
    // arena's "positions" view, which an architecture taking them must lay out.
    Batch begin_forward(Activations& acts, const Activations::LayoutFn& layout, const int32_t* inputs,
                        const int32_t* targets, int B, int T, bool train, const int32_t* positions = nullptr);
    // Shared by every architecture's forward, its end: the LM head (models/lm_head.h) on x (BT, C), the final
    // norm's output, with head weights `head`. Without targets: the logits of every row (logits(), CPU);
    // returns 0. Else the mean cross-entropy over the counted targets and, when training, the head's backward:
    // dx = d x (the model's backward starts from it) and the head's gradient +=.
    struct HeadBuffers {
        Tensor logits;   // (chunk rows, Vp) scratch
        Tensor losses;   // (BT) f32
        Tensor targets;  // (BT) i32 on the device (begin_forward's copy)
        Tensor dx;       // (BT, C): written when training
    };
    float head_forward(const Batch& batch, const int32_t* targets, Tensor x, ParamId head, const HeadBuffers& buf,
                       bool train, float loss_scale);
    // Every gradient at and after base parameter `first` is final (under LoRA: every adapter of the base
    // weights from `first` on).
    void grads_ready_from(ParamId first) const {
        if (grads_ready_) grads_ready_(lora_ ? lora_->ready_offset(first) : store_.grad_offset(first));
    }
    void grads_ready_all() const {
        if (grads_ready_) grads_ready_(0);
    }

    ModelDims dims_;
    ParamStore store_;
    std::unique_ptr<LoraAdapters> lora_;
    Arena grad_sink_;  // frozen base: grad_or_sink()'s buffer
    uint64_t dropout_seed_ = 0;
    std::function<void(size_t)> grads_ready_;
    UnitGather* gather_ = nullptr;
    std::vector<float> all_logits_;  // forward without targets: host memory whatever the device
    int B_ = 0, T_ = 0;  // of the last forward
};

}  // namespace llmt::models
