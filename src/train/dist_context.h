// The training process's place in a data-parallel job (docs/design.md §4): torchrun's worker variables,
// the rendezvous store that rank 0 serves at MASTER_ADDR:MASTER_PORT, and the process group. A single
// process (WORLD_SIZE unset or 1) gets an inactive context whose helpers are identities, so the
// trainer has one code path. On a GPU (device kCuda) the group is NCCL, one process per GPU LOCAL_RANK.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "config/config.h"
#include "core/arena.h"
#include "distributed/env.h"
#include "distributed/process_group.h"
#include "distributed/store.h"
#include "optim/param_slots.h"

namespace llmt::models {
class ParamStore;
}

namespace llmt::train {

// How a rank synchronises gradients (dist.zero_stage, dist.bucket_mb, dist.overlap) in a world of
// `world` ranks. One process has nothing to synchronise: every field stays off, whatever the keys say
// (docs/config.md), so a data-parallel config also runs as one process.
struct GradSync {
    bool zero1 = false;       // ZeRO-1: reduce-scatter after the accumulation window, sharded optimizer state
    bool zero3 = false;       // ZeRO-3: parameters, gradients and optimizer state sharded per unit (zero3_state.h);
                              // under LoRA the frozen base per unit, the adapters all-reduced (DDP's Reducer)
    size_t bucket_bytes = 0;  // DDP: all-reduce bucket size (0 = no DDP Reducer: one rank, ZeRO-1, ZeRO-3)
    bool overlap = false;     // DDP: all-reduce buckets while backward still runs
};
GradSync grad_sync_plan(const config::Config& cfg, int world);

// ZeRO-1's split of a flat arena of `numel` elements over `world` ranks (the optimizer slice of `rank`,
// optim/param_slots.h): rank r owns [r*s, (r+1)*s) with s = numel / world, and the last rank also the
// remainder [world*s, numel), fewer than `world` elements (none for world 2, 4, 8 or 16: arenas are
// whole 64-byte lines). Equal chunks let the reduce-scatter and all-gather run in place on the arena.
// world 1: the whole arena. InternalError when 0 < numel < world.
optim::ArenaSlice zero_shard(size_t numel, int world, int rank);

class DistContext {
public:
    // Reads the worker environment; with WORLD_SIZE > 1 connects the store (rank 0 serves it), runs
    // the rendezvous (duplicate ranks, mismatched world sizes and missing ranks are named) and creates
    // the process group of dist.backend (auto = nccl when `device` (run.device resolved) is cuda, gloo
    // otherwise). With nccl it first makes GPU LOCAL_RANK current (before any CUDA work: call this
    // before the model allocates). Throws UsageError for a contradictory environment, InputError for
    // nccl on the CPU, gloo on a GPU or LOCAL_RANK beyond the visible GPUs, DistError/DistTimeout when
    // peers do not arrive within dist.timeout_sec.
    static DistContext create(const config::Config& cfg, Device device = Device::kCpu);
    static DistContext single() { return DistContext(); }

    bool active() const { return pg_ != nullptr; }
    int rank() const { return env_.rank; }
    int world() const { return env_.world_size; }
    const dist::WorkerEnv& env() const { return env_; }
    dist::ProcessGroup& pg() { return *pg_; }
    // Where the group's tensors live: kCuda for nccl (this process's GPU), kCpu for gloo.
    Device device() const { return device_; }

    // Mean over ranks of one value per rank (identity when inactive; through a one-float device buffer
    // under nccl). Every rank must call it.
    double mean(double v);
    // Sum over ranks of one value per rank (identity when inactive). Every rank must call it.
    double sum(double v);
    // Element-wise sum over ranks of a vector, in place, in one f32 all-reduce (counts are exact below
    // 2^24). Every rank must call it with the same length.
    void sum(std::vector<double>& values);

    // ZeRO-1 on a flat f32 arena of `numel` elements on device(), split by zero_shard(). Both work in
    // place on the arena (in-place reduce-scatter and all-gather): no staging buffer of the arena's size.
    // zero_reduce_grads reduce-scatters the gradients (mean over ranks) into this rank's slice of `grads`
    // (the rest of `grads` is left unspecified: zero it before the next accumulation) and returns the
    // global sum of squares of the mean gradient; zero_gather_params all-gathers every rank's slice of
    // `params`, so every rank holds the whole arena. With `compute_copy` (the model's flat bf16 copy,
    // which the optimizer rewrote for its slice) that copy is gathered instead, half the bytes: the fp32
    // masters outside this rank's slice are then stale until a gather without it. Every rank must call
    // them. InternalError when the arena has fewer elements than there are ranks.
    // With `compute_copy` `params` is not read (it may be a sharded store's masters).
    double zero_reduce_grads(float* grads, size_t numel);
    void zero_gather_params(float* params, size_t numel, Tensor compute_copy = {});

    // A store whose fp32 masters are sharded by zero_shard() (ParamStore::shard_masters): its whole fp32
    // arena in host memory on rank 0, laid out like store.params(); an empty arena on the other ranks.
    // Each rank broadcasts its shard in pieces of at most kGatherPiece floats through one buffer of that
    // size on device() (the process group has no gather; the checkpoint is the only caller), so no rank
    // but 0 ever holds more than its shard and one piece. An unsharded store is copied on rank 0 alone.
    // Every rank must call it.
    static constexpr size_t kGatherPiece = size_t{1} << 22;
    Arena gather_masters(const models::ParamStore& store);

    // Rank 0's `value` on every rank, through the store under `key` (each key used once per job).
    std::string from_rank0(const std::string& key, const std::string& value);
    void barrier();

private:
    DistContext() = default;
    dist::WorkerEnv env_;
    Device device_ = Device::kCpu;
    std::unique_ptr<dist::Store> store_;
    std::unique_ptr<dist::ProcessGroup> pg_;
    Arena scalar_;  // nccl: one f32 on the GPU for mean()
    double reduce_scalar(double v, dist::ReduceOp op);
};

}  // namespace llmt::train
