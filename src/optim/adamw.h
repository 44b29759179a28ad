// AdamW over a flat fp32 parameter arena (Loshchilov & Hutter 2019; the update is torch.optim.AdamW's,
// computed by kernels::adamw_update). The optimizer owns a [begin, end) slice of the arena — the whole
// arena for plain training, one rank's shard under ZeRO-1 — and keeps fp32 m and v for that slice only.
// Checkpoint layout of its state: docs/formats/checkpoint.md ("optimizer.safetensors"). On CUDA the state
// lives in device memory and the step runs there; checkpoints stage it through host memory (same file).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/safetensors.h"
#include "optim/optimizer.h"
#include "optim/param_slots.h"

namespace llmt::optim {

struct AdamWConfig {
    float beta1 = 0.9f;
    float beta2 = 0.95f;
    float eps = 1e-8f;
    float weight_decay = 0.1f;  // applied (decoupled: p *= 1 - lr*wd) to slots with decay == true
};

// Not thread-safe; one instance per rank. The arena pointers passed to step() are not retained.
class AdamW final : public Optimizer {
public:
    // Throws InputError when slots overlap, leave the arena, repeat a name, have a negative extent,
    // or when the slice is empty or outside the arena. Slots may leave gaps (padding); gap elements
    // are never touched. A slot that straddles a slice boundary is updated for its part inside.
    // `device`: where m, v and the arena pointers given to step() live.
    AdamW(std::vector<ParamSlot> slots, std::size_t arena_numel, AdamWConfig cfg, ArenaSlice slice = {},
          Device device = Device::kCpu);

    // One optimizer step on params[begin, end) from grads[begin, end) (both full-arena pointers):
    // g = grads * grad_scale (the clipping coefficient), then the AdamW update with step count t+1.
    // params_lp (optional): the model's flat bf16 compute copy, rewritten in the same pass; at: as Optimizer::step.
    void step(float* params, const float* grads, float lr, float grad_scale = 1.0f, Tensor params_lp = {},
              ParamsAt at = ParamsAt::kArena) override;
    const char* name() const override { return "adamw"; }

    std::int64_t step_count() const { return step_; }
    const AdamWConfig& config() const { return cfg_; }
    std::size_t begin() const { return begin_; }
    std::size_t end() const { return end_; }
    const std::vector<ParamSlot>& slots() const { return slots_; }

    // The state as named tensors for optimizer.safetensors: "<param>.exp_avg", "<param>.exp_avg_sq"
    // (the param's shape, or [k] for the k elements of a slot cut by the slice), and "step" (I64 []).
    // The refs point into this object (host memory: a device state is copied over first) and stay valid
    // until the next step(), state_tensors() or load_state().
    std::vector<TensorRef> state_tensors() const override;
    // Names, dtypes and shapes state_tensors() produces (what load_state() expects).
    std::vector<TensorSpec> state_specs() const;
    // Metadata to store beside the state: format tag, arena size and slice bounds.
    std::map<std::string, std::string> state_metadata() const override;

    // Restores m, v and the step count from a file written from state_tensors()/state_metadata().
    // Throws CheckpointError listing every difference (missing/unexpected names, shapes, dtypes,
    // slice/arena mismatch), or naming both optimizers for another optimizer's state, and changes nothing
    // in that case.
    void load_state(const SafetensorsFile& file) override;
    void load_state_shards(const std::vector<const SafetensorsFile*>& files) override;

private:
    using Piece = SlicePlan::Piece;
    using Run = SlicePlan::Run;  // kernels::adamw_update_runs takes them all at once

    std::vector<ParamSlot> slots_;
    std::size_t arena_numel_;
    AdamWConfig cfg_;
    std::size_t begin_, end_;
    std::vector<Piece> pieces_;
    std::vector<Run> runs_;
    Device device_ = Device::kCpu;
    // (end - begin), indexed by arena index - begin: the state on the CPU, a staging copy for checkpoints
    // when the state lives in device_state_ ("m", "v") on a GPU.
    mutable std::vector<float> m_, v_;
    Arena device_state_;
    std::int64_t step_ = 0;

    float* m_data() const;
    float* v_data() const;
};

}  // namespace llmt::optim
