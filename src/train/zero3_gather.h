// ZeRO-3's per-unit gathers (models/unit_gather.h) over the process group: a unit's weights are
// all-gathered from every rank's chunk of its fp32 masters (converted to the compute dtype first, so a bf16
// run moves bf16) into a buffer the store's weight() then reads; its gradients accumulate in a buffer of
// the unit's size and are reduce-scattered (mean over ranks) into this rank's fp32 chunk accumulator when
// the unit is released (gradient accumulation adds there). docs/distributed.md "ZeRO-3".
// Prefetch: prefetch(u) starts u's all-gather asynchronously (nccl: on the group's communication stream,
// joined by the compute stream; gloo: on a helper thread) while the current unit computes; it is joined
// before any other collective, so one collective at a time reaches the group.
// Four buffer slots: the embeddings' unit (held across a step when the head is tied to them), the final
// unit (norm and untied head: held from the end of the forward to the start of backward) and two for the
// blocks (the one computing and the prefetched next). Not thread-safe.
#pragma once

#include <cstddef>
#include <future>
#include <utility>

#include "core/arena.h"
#include "models/unit_gather.h"

namespace llmt::models {
class ParamStore;
}

namespace llmt::train {

class DistContext;

class Zero3Gather final : public models::UnitGather {
public:
    // store: sharded in groups (ParamStore::shard_groups) over dc's ranks, on dc.device(); both outlive this.
    // Allocates the slots (each the largest unit it serves: weights in the compute dtype, gradients in fp32;
    // none for a frozen store, LoRA's base, whose acquire(unit, true) gathers the weights alone). InternalError for a
    // store that is not sharded in groups or a context that is not active.
    Zero3Gather(DistContext& dc, models::ParamStore& store);

    ~Zero3Gather() override;
    Zero3Gather(const Zero3Gather&) = delete;
    Zero3Gather& operator=(const Zero3Gather&) = delete;

    void acquire(int unit, bool grads) override;
    void release(int unit) override;
    void prefetch(int unit) override;

    // Group g's fp32 masters gathered whole on every rank (world * chunk floats laid out from the group's
    // begin) in a buffer of this object on the store's device, valid until the next call of any method.
    // Every rank must call it; no unit may be held.
    const float* gather_masters(size_t g);
    // Drops the gathers no unit holds (a prefetch not acquired): call when the masters change (the step).
    void forget_unheld();
    // Gathers so far: every unit gathered, and how many of those were prefetched (overlapping compute).
    struct Counts {
        long gathers = 0, prefetched = 0;
    };
    const Counts& counts() const { return counts_; }
    // Bytes of the slots.
    size_t buffer_bytes() const;

private:
    struct Slot {
        Arena weights, grads;
        int unit = -1;       // gathered (held or prefetched), or -1
        bool held = false;   // acquired and not released
        bool with_grads = false;
    };
    // Slot kinds: 0 the embeddings' unit, 1 the final unit, 2 the blocks (slots 2 and 3).
    static size_t kind_of(size_t g, size_t groups);
    // The slot that has unit g gathered, else a slot of its kind that is not held (nullptr: none).
    Slot* slot_for(size_t g);
    // Converts this rank's chunk into its place in the slot's buffer; returns (whole buffer, that place).
    std::pair<Tensor, Tensor> stage_chunk(size_t g, Slot& s);
    void reduce_grads(size_t g, Slot& s);
    // Waits for the prefetch in flight (rethrowing its error).
    void join();

    DistContext& dc_;
    models::ParamStore& store_;
    Slot slots_[4];
    std::future<void> inflight_;  // gloo: the helper thread's all-gather
    bool inflight_device_ = false;  // nccl: an all-gather queued on the communication stream
    Counts counts_;
};

}  // namespace llmt::train
