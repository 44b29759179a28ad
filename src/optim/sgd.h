// SGD with momentum over a flat fp32 parameter arena: torch.optim.SGD's update (weight decay as L2 on the
// gradient, the momentum buffer set to the first gradient, dampening, Nesterov), computed by
// kernels::sgd_update_runs. Like AdamW (adamw.h) it owns a [begin, end) slice of the arena — the whole
// arena, or one rank's ZeRO-1 shard — and keeps the fp32 momentum buffer for that slice only (none when
// momentum is 0). Checkpoint layout: docs/formats/checkpoint.md ("optimizer.safetensors").
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/safetensors.h"
#include "kernels/adamw_params.h"  // AdamWRun
#include "optim/optimizer.h"
#include "optim/param_slots.h"

namespace llmt::optim {

struct SgdConfig {
    float momentum = 0.9f;
    float dampening = 0.0f;
    bool nesterov = false;      // needs momentum > 0 and dampening 0 (as torch.optim.SGD)
    float weight_decay = 0.0f;  // L2 (g += wd * p) on slots with decay == true
};

class Sgd final : public Optimizer {
public:
    // Slots and slice as AdamW takes them (param_slots.h; the same errors). `device`: where the buffer and
    // the arena pointers given to step() live.
    Sgd(std::vector<ParamSlot> slots, std::size_t arena_numel, SgdConfig cfg, ArenaSlice slice = {},
        Device device = Device::kCpu);

    const char* name() const override { return "sgd"; }
    void step(float* params, const float* grads, float lr, float grad_scale = 1.0f, Tensor params_lp = {},
              ParamsAt at = ParamsAt::kArena) override;

    std::int64_t step_count() const { return step_; }
    const SgdConfig& config() const { return cfg_; }
    std::size_t begin() const { return begin_; }
    std::size_t end() const { return end_; }

    // "<param>.momentum_buffer" (torch's state key; the param's shape, or [k] for the k elements of a slot
    // cut by the slice; absent when momentum is 0) and "step" (I64 []).
    std::vector<TensorRef> state_tensors() const override;
    std::vector<TensorSpec> state_specs() const;
    std::map<std::string, std::string> state_metadata() const override;
    void load_state(const SafetensorsFile& file) override;
    void load_state_shards(const std::vector<const SafetensorsFile*>& files) override;

private:
    bool has_buffer() const { return cfg_.momentum != 0.0f; }
    float* buf_data() const;

    std::vector<ParamSlot> slots_;
    std::size_t arena_numel_;
    SgdConfig cfg_;
    std::size_t begin_, end_;
    std::vector<SlicePlan::Piece> pieces_;
    std::vector<kernels::AdamWRun> runs_;  // relative to begin_
    Device device_ = Device::kCpu;
    // (end - begin), indexed by arena index - begin: the buffer on the CPU, a staging copy for checkpoints
    // when it lives in device_buf_ on a GPU.
    mutable std::vector<float> buf_;
    Arena device_buf_;
    std::int64_t step_ = 0;
};

}  // namespace llmt::optim
