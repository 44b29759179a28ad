// A model's parameters: the table of ParamSpecs, the fp32 master arena laid out from it, the gradient
// arena mirroring it, and under bf16 mixed precision the compute copy the kernels read. Shared by every
// architecture; a model adds its tensors once and keeps the returned indices as typed handles.
// A frozen store (LoRA's base model) holds the weights only: no gradients, no optimizer, and under bf16
// the bf16 weights alone (no fp32 master), so a frozen 1B base costs 2.5 GB instead of 15.
// Sharded masters (ZeRO-1 under bf16, shard_masters()): the store keeps the whole bf16 compute copy and the
// gradient arena, but the fp32 masters of one slice of the flat arena only; params() is then the layout
// alone (entries and offsets, no buffer), and the other ranks hold the rest of the masters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>


#include "core/arena.h"
#include "core/tensor.h"
#include "models/param_spec.h"

namespace llmt::models {

// An index into the parameter table, returned by ParamStore::add.
using ParamId = size_t;

class ParamStore {
public:
    ParamStore() = default;
    ParamStore(ParamStore&&) noexcept = default;
    ParamStore& operator=(ParamStore&&) noexcept = default;

    // Appends a tensor to the table (before layout()).
    ParamId add(ParamSpec spec);
    // Lays out the arenas for `device` and compute `dtype` (f32, or bf16; the models run bf16 on CUDA only,
    // run_plan.h refuses it on the CPU, the store itself keeps bf16 on either device). Nothing allocated.
    // frozen: weights only (see above); weight() is then the arena's own view, in `dtype`.
    void layout(Device device, DType dtype, bool frozen = false);
    // Allocates parameters (zeroed), gradients and the bf16 copy.
    void allocate();
    bool frozen() const { return frozen_; }

    // Keeps the fp32 masters of flat-arena elements [begin, end) only and releases the whole fp32 arena:
    // an allocated, trained bf16 store (the compute copy holds every weight); begin < end <= the arena's
    // floats. Afterwards write_f32 writes the compute copy whole and the masters' part in the slice,
    // sync_compute_params refreshes the slice of the compute copy, and read_f32 is refused (gather the
    // masters first: train/dist_context.h). InternalError otherwise.
    void shard_masters(size_t begin, size_t end);
    bool masters_sharded() const { return sharded_; }
    // Elements [master_begin(), master_end()) of the flat arena have fp32 masters here (the whole arena
    // unless sharded), starting at masters(): the optimizer's `params` for that slice.
    size_t master_begin() const { return sharded_ ? mbegin_ : 0; }
    size_t master_end() const { return sharded_ ? mend_ : params_.nbytes() / sizeof(float); }
    float* masters() const;

    Device device() const { return device_; }
    DType dtype() const { return dtype_; }
    const std::vector<ParamSpec>& specs() const { return specs_; }
    const ParamSpec& spec(ParamId id) const { return specs_[id]; }
    Arena& params() { return params_; }
    Arena& grads() { return grads_; }
    const Arena& params() const { return params_; }
    const Arena& grads() const { return grads_; }
    // Floats of the flat arena (alignment gaps included), whether or not the fp32 arena is allocated.
    size_t arena_numel() const { return params_.nbytes() / sizeof(float); }

    // Parameter `id` as the kernels read it: the fp32 master view, or its bf16 compute copy.
    Tensor weight(ParamId id) const;
    // Its gradient (fp32); empty for a frozen store.
    Tensor grad(ParamId id) const { return frozen_ ? Tensor() : grads_.view(id); }
    // Byte offset of `id` in the gradient arena (the data-parallel Reducer's unit).
    size_t grad_offset(ParamId id) const { return params_.entry(id).offset; }

    // bf16: the compute copy as one flat bf16 tensor indexed like params() (element i of the arena,
    // alignment gaps included), which the optimizer rewrites after each update; empty for f32.
    Tensor compute_params() const;
    // Refreshes the compute copy from params() (after writing params() other than through the optimizer).
    void sync_compute_params();
    // Writes tensor `id` from fp32 host values (numel floats), converting to the arena's dtype; the
    // compute copy is refreshed by the caller (sync_compute_params) once all are written.
    void write_f32(ParamId id, const float* host);
    // Its fp32 values on the host (refused while the masters are sharded).
    std::vector<float> read_f32(ParamId id) const;

    // Parameters counted as Hugging Face counts them: padding rows excluded, each tensor once.
    int64_t num_parameters() const;
    // Draws every tensor from its ParamInit: N(0, std), N(0, residual_std), zeros or ones; padding rows 0.
    // One counter-based stream per tensor, so values depend on (seed, tensor index) only, on any device.
    void init_random(uint64_t seed, double std, double residual_std);

    // Bytes of the parameters (the fp32 masters, whole or this shard, + the bf16 copy) and of the gradients,
    // laid out or allocated.
    size_t param_bytes() const { return (sharded_ ? masters_.nbytes() : params_.nbytes()) + params_lp_.nbytes(); }
    size_t grad_bytes() const { return frozen_ ? 0 : params_.nbytes(); }

private:
    void write_sharded(ParamId id, const float* host);

    std::vector<ParamSpec> specs_;
    Device device_ = Device::kCpu;
    DType dtype_ = DType::kF32;
    bool frozen_ = false;
    Arena params_, grads_;
    Arena params_lp_;  // bf16 compute copy (one flat view), allocated only for dtype bf16
    Arena masters_;    // sharded masters: elements [mbegin_, mend_) of the flat fp32 arena
    size_t mbegin_ = 0, mend_ = 0;
    bool sharded_ = false;
};

}  // namespace llmt::models
