// ProcessGroup: the collectives data-parallel training needs (c10d's ProcessGroup, narrowed): in-place
// all-reduce, reduce-scatter, all-gather, broadcast, barrier. Implementations: GlooProcessGroup (CPU),
// NcclProcessGroup (CUDA, built with LLMTRAIN_CUDA). docs/distributed.md "Store and process group".
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "core/tensor.h"

namespace llmt::dist {

class Store;

enum class ReduceOp { kSum, kAvg };

// Every collective is blocking and must be called by every rank in the same order with the same
// sizes. Each one is bounded by the group's timeout: a dead or stuck peer becomes DistError /
// DistTimeout (core/error.h) on every survivor, never a hang. After such an error the group is broken
// and must not be used again. Tensors are contiguous f32 or i32 (kAvg: f32 only; nccl also bf16, gloo bf16
// for allgather and broadcast, which only move bytes) on the
// backend's device (gloo: CPU; nccl: this process's GPU); a wrong dtype/device/size is InputError.
// Thread safety: one thread at a time per group (the Reducer's thread, or the caller's).
class ProcessGroup {
public:
    virtual ~ProcessGroup();
    virtual int rank() const = 0;
    virtual int size() const = 0;
    virtual std::string_view backend() const = 0;

    // In place: every rank ends with the element-wise sum (kAvg: sum / size()).
    virtual void allreduce(Tensor t, ReduceOp op) = 0;
    // in.numel() == size() * out.numel(); rank r receives the reduction of chunk r of every rank's in.
    // In place when out is chunk rank() of in (out.data == in.data + rank() * out.nbytes(), as NCCL
    // defines it): no second buffer of in's size is allocated, and the other chunks of in are left
    // unspecified. Out of place, in is not modified.
    virtual void reduce_scatter(Tensor out, Tensor in, ReduceOp op) = 0;
    // out.numel() == size() * in.numel(); chunk r of out is rank r's in. In place when in is chunk
    // rank() of out.
    virtual void allgather(Tensor out, Tensor in) = 0;
    // Every rank ends with root's t.
    virtual void broadcast(Tensor t, int root) = 0;
    virtual void barrier() = 0;

    // Device-side asynchronous all-reduce (nccl; has_async()): queued after the work the compute stream
    // (kernels::cuda::stream()) holds now, run on the group's communication stream, and returns at once
    // without blocking the host. join_async() makes the compute stream wait for every collective queued
    // so far (the host does not wait) and throws the error (DistError / DistTimeout) of one that failed
    // or timed out by now. The bytes of t must not be written until join_async(). Backends without
    // device streams (gloo) throw InternalError.
    virtual bool has_async() const { return false; }
    virtual void allreduce_async(Tensor t, ReduceOp op);
    // The all-gather the same way (ZeRO-3's prefetch of the next unit); out must not be read until join_async().
    virtual void allgather_async(Tensor out, Tensor in);
    virtual void join_async();
};

// backend "gloo" (CPU, TCP) or "nccl" (CUDA; the calling thread's current GPU; a build without CUDA
// throws DeviceError). Runs the store rendezvous of the backend and connects every rank; throws
// DistTimeout when a rank does not arrive in time.
bool nccl_available();

// For the nccl backend, before any CUDA work of this process: makes GPU `local_rank` the current device
// (one process per GPU, as torchrun's LOCAL_RANK). InputError naming LOCAL_RANK and the number of
// visible GPUs when there is no such GPU; DeviceError in a build without CUDA.
void use_gpu_of_local_rank(int local_rank);
std::unique_ptr<ProcessGroup> make_process_group(const std::string& backend, Store& store, int rank, int size,
                                                 std::chrono::milliseconds timeout);

}  // namespace llmt::dist
