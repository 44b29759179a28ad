// LoRA adapters (Hu et al. 2021) on a model's linear layers, in PEFT's layout: for each adapted module
// (an HF linear such as model.layers.0.self_attn.q_proj) A (r, in) drawn Kaiming-uniform and B (out, r)
// zero, adding scale * B A x to the module's output, scale = alpha / r (alpha / sqrt(r) with rsLoRA).
// The adapters have their own ParamStore (fp32 masters, gradients, the bf16 compute copy), which is
// what the trainer, the Reducer, ZeRO-1 and AdamW see; the base model's store is frozen.
// Fused base layers (LLaMA's q|k|v, gate|up) keep one A and one B tensor per layer holding its adapted
// parts stacked, named per part as PEFT names them (HfPart rows), so one GEMM computes every part's
// B-input and the adapters read the layer's input once.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/rng.h"
#include "kernels/ops.h"
#include "models/activations.h"
#include "models/param_store.h"

namespace llmt::models {

struct LoraSpec {
    int r = 0;  // 0: no LoRA
    double alpha = 16.0;
    // Dropout on the adapters' input in training (PEFT's lora_dropout): x -> dropout -> A -> B. One mask per
    // adapted tensor (the parts of a fused q|k|v share it; PEFT draws one per module), from the model's
    // dropout seed, so trainer.recompute and resume redraw the same masks.
    double dropout = 0.0;
    bool rslora = false;
    // PEFT's target_modules: names matched against the end of each module's name ("q_proj" matches
    // model.layers.N.self_attn.q_proj), "all-linear" (every linear layer but the output head), or a single
    // entry with regex characters, full-matched against the whole module name.
    std::vector<std::string> target_modules;

    bool on() const { return r > 0; }
    float scale() const;
};

// The HF module names of a base table's linear layers that LoRA may adapt, in table order (each
// 2-D kWeight tensor's HF parts, ".weight" removed; the output head excluded).
std::vector<std::string> lora_candidate_modules(const std::vector<ParamSpec>& base);
// The candidates `spec.target_modules` selects; InputError naming lora.target_modules when an entry
// matches none (PEFT's "target modules not found") or a regex does not compile.
std::vector<std::string> lora_select_modules(const LoraSpec& spec, const std::vector<ParamSpec>& base);

class LoraAdapters {
public:
    // Lays out the adapters for `spec` over the base table (no allocation: allocate()).
    LoraAdapters(const LoraSpec& spec, const std::vector<ParamSpec>& base, Device device, DType dtype);
    void allocate() { store_.allocate(); }
    // A: U(-1/sqrt(in), 1/sqrt(in)) per tensor stream of `seed` (nn.Linear's default, as PEFT); B: zero.
    void init_random(uint64_t seed) { store_.init_random(seed, 0.0, 0.0); }

    const LoraSpec& spec() const { return spec_; }
    float scale() const { return spec_.scale(); }
    ParamStore& store() { return store_; }
    const ParamStore& store() const { return store_; }
    // The adapted modules' HF names, in table order (adapter_config.json's target_modules).
    const std::vector<std::string>& modules() const { return modules_; }
    bool adapts(ParamId base_weight) const { return by_base_.count(base_weight) != 0; }

    // Sizes the kept B-inputs for a (B, T) batch; `train` turns dropout on with masks from `seed`.
    void begin(int B, int T, bool train, uint64_t seed);
    // out (.., OC) += the adapters' delta for base weight `w` given its input inp (.., in); no-op when `w`
    // has no adapter.
    void forward(ParamId w, Tensor out, Tensor inp);
    // dinp += the adapters' share, their gradients +=, given dout, the gradient of the layer's output.
    void backward(ParamId w, Tensor dinp, Tensor dout, Tensor inp);
    // The gradient-arena offset from which every adapter gradient is final once backward has passed the
    // base weights >= `base_first` in table order (the Reducer's hook): the first adapter of a base
    // weight at or after it, or the arena's end.
    size_t ready_offset(ParamId base_first) const;
    size_t activation_bytes(int B, int T) const { return layout(B, T).nbytes(); }
    // W += scale * B_p A_p for every adapted part of the base weights in `base` (the table these adapters
    // were built on), computed in fp32 on the host and stored in the base's dtype (PEFT's merge).
    void merge_into(ParamStore& base) const;

private:
    struct Projection {
        ParamId a = 0, b = 0;
        std::vector<kernels::LoraSpan> spans;
        ActId u = 0;
        int64_t in = 0;
    };
    Arena layout(int B, int T) const;
    bool dropped() const { return train_ && spec_.dropout > 0; }
    // The dropout seed of base weight w's adapters for this micro-step (forward and backward draw the same mask).
    uint64_t mask_seed(ParamId w) const { return splitmix64(seed_ ^ splitmix64(0x6c6f7261ull + w)); }
    // The dropped input of base weight w's adapters (its mask from the seed and w), in the xd buffer.
    Tensor dropped_input(ParamId w, const Projection& pr, Tensor inp);

    LoraSpec spec_;
    ParamStore store_;
    std::vector<std::string> modules_;
    std::map<ParamId, Projection> by_base_;
    std::vector<std::pair<ParamId, size_t>> ready_;  // (base weight, first adapter's grad offset), ascending
    ActId du_ = 0, xd_ = 0, dxd_ = 0;  // xd, dxd: with dropout only
    int64_t max_width_ = 0;  // the largest P * r
    int64_t max_in_ = 0;     // the widest adapted input
    bool train_ = false;
    uint64_t seed_ = 0;
    Activations acts_;
    int B_ = 0, T_ = 0;
};

}  // namespace llmt::models
