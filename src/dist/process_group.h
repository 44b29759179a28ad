// ProcessGroup: the collectives data-parallel training needs (c10d's ProcessGroup, narrowed): in-place
// all-reduce, reduce-scatter, all-gather, broadcast, barrier. Implementations: GlooProcessGroup (CPU).
// docs/distributed.md "Store and process group".
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
// and must not be used again. Tensors are contiguous CPU f32 or i32 (kAvg: f32 only); a wrong
// dtype/device/size is InputError.
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
    virtual void reduce_scatter(Tensor out, Tensor in, ReduceOp op) = 0;
    // out.numel() == size() * in.numel(); chunk r of out is rank r's in.
    virtual void allgather(Tensor out, Tensor in) = 0;
    // Every rank ends with root's t.
    virtual void broadcast(Tensor t, int root) = 0;
    virtual void barrier() = 0;
};

// backend "gloo" (CPU, TCP); "nccl" is not built yet (DeviceError). Runs the store rendezvous of the
// backend and connects every pair of ranks; throws DistTimeout when a rank does not arrive in time.
std::unique_ptr<ProcessGroup> make_process_group(const std::string& backend, Store& store, int rank, int size,
                                                 std::chrono::milliseconds timeout);

}  // namespace llmt::dist
