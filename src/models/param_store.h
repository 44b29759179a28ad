// A model's parameters: the table of ParamSpecs, the fp32 master arena laid out from it, the gradient
// arena mirroring it, and under bf16 mixed precision the compute copy the kernels read. Shared by every
// architecture; a model adds its tensors once and keeps the returned indices as typed handles.
// A frozen store (LoRA's base model) holds the weights only: no gradients, no optimizer, and under bf16
// the bf16 weights alone (no fp32 master), so a frozen 1B base costs 2.5 GB instead of 15.
// Sharded masters (ZeRO-1 under bf16, shard_masters()): the store keeps the whole bf16 compute copy and the
// gradient arena, but the fp32 masters of one slice of the flat arena only; params() is then the layout
// alone (entries and offsets, no buffer), and the other ranks hold the rest of the masters.
// Sharded groups (ZeRO-3, shard_groups() before allocate()): the table is cut into groups of consecutive
// tensors (a transformer's embeddings, each layer, the final norm and head); the store holds this rank's
// chunk of every group (fp32 masters and an fp32 gradient accumulator) and nothing whole. weight(id) and
// grad(id) then resolve through the buffers the caller bound for the tensor's group (its gathered weights
// and its gradient), which the trainer's per-layer gathers fill (train/zero3.h).
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

// ZeRO-3: the rank's place when a model's parameters are sharded per unit (ParamStore::shard_groups over
// Model::shard_units()); world 1: whole parameters.
struct ParamShard {
    int world = 1, rank = 0;
    bool on() const { return world > 1; }
};

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

    // ZeRO-3: groups start at `firsts` (ascending, firsts[0] == 0; group g ends where g + 1 starts, the last
    // at the arena's end, alignment gaps included) and are cut into `world` equal chunks of `chunk` floats
    // (a multiple of 16: chunk starts stay 64-byte aligned); rank r's chunk of g is arena elements
    // [begin + r * chunk, begin + (r + 1) * chunk) cut at g's end, possibly empty. Call after layout() and
    // before allocate(); allocate() then allocates the rank's chunks only (zeroed). A frozen store (LoRA's
    // base) keeps its chunks in the compute dtype and no gradients. InternalError otherwise.
    struct Group {
        ParamId first = 0, last = 0;  // tensors [first, last)
        size_t begin = 0, end = 0;    // arena elements
        size_t chunk = 0;             // floats per rank; the gathered group is world * chunk floats
        size_t local = 0;             // where this rank's chunk starts in masters() and the gradient chunks
    };
    void shard_groups(const std::vector<ParamId>& firsts, int world, int rank);
    bool groups_sharded() const { return !groups_.empty(); }
    const std::vector<Group>& groups() const { return groups_; }
    size_t group_of(ParamId id) const { return group_of_[id]; }
    int shard_world() const { return world_; }
    int shard_rank() const { return rank_; }
    // This rank's chunk of group g (chunk floats, the padding zero): fp32 masters, or a frozen store's weights
    // in the compute dtype.
    Tensor chunk_view(size_t g) const;
    // Arena elements [first, last) of this rank's chunk of group g (first == last: empty).
    size_t chunk_first(size_t g) const;
    size_t chunk_last(size_t g) const;
    // Binds group g's gathered weights (world * chunk elements in dtype(), laid out like the arena from the
    // group's begin) and optionally its gradient buffer (fp32, the same layout): weight(id) and grad(id) of
    // its tensors point there until unbind_group(g). The store does not own them.
    void bind_group(size_t g, void* weights, float* grads);
    void unbind_group(size_t g);

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
    Tensor grad(ParamId id) const;
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
    size_t param_bytes() const {
        return (sharded_ || groups_sharded() ? masters_.nbytes() : params_.nbytes()) + params_lp_.nbytes();
    }
    size_t grad_bytes() const { return frozen_ ? 0 : groups_sharded() ? grads_.nbytes() : params_.nbytes(); }

private:
    void write_sharded(ParamId id, const float* host);
    void write_grouped(ParamId id, const float* host);
    void allocate_groups();
    Tensor bound_view(ParamId id, const void* base, DType dtype, const char* what) const;

    std::vector<ParamSpec> specs_;
    Device device_ = Device::kCpu;
    DType dtype_ = DType::kF32;
    bool frozen_ = false;
    Arena params_, grads_;  // ZeRO-3: params_ the layout alone, grads_ the chunks' gradient accumulator
    Arena params_lp_;  // bf16 compute copy (one flat view), allocated only for dtype bf16
    Arena masters_;    // sharded masters: elements [mbegin_, mend_) of the flat fp32 arena, or ZeRO-3's chunks
    size_t mbegin_ = 0, mend_ = 0;
    bool sharded_ = false;
    // ZeRO-3: the groups, each tensor's group, and the bound buffers of each group.
    std::vector<Group> groups_;
    std::vector<size_t> group_of_;
    std::vector<const void*> bound_weights_;
    std::vector<float*> bound_grads_;
    int world_ = 1, rank_ = 0;
};

}  // namespace llmt::models
