// ZeRO-3's per-unit gathers (models/unit_gather.h) over the process group: a unit's weights are
// all-gathered from every rank's chunk of its fp32 masters (converted to the compute dtype first, so a bf16
// run moves bf16) into a buffer the store's weight() then reads; its gradients accumulate in a buffer of
// the unit's size and are reduce-scattered (mean over ranks) into this rank's fp32 chunk accumulator when
// the unit is released (gradient accumulation adds there). docs/distributed.md "ZeRO-3".
// Three buffer slots: the embeddings' unit (held across a step when the head is tied to them), the final
// unit (norm and untied head: held from the end of the forward to the start of backward) and one for the
// layers, so a rank holds at most those three units whole. Not thread-safe; the gathers are synchronous.
#pragma once

#include <cstddef>

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
    // Allocates the three slots (each the largest unit it serves: weights in the compute dtype, gradients
    // in fp32). InternalError for a store that is not sharded in groups or a context that is not active.
    Zero3Gather(DistContext& dc, models::ParamStore& store);

    void acquire(int unit, bool grads) override;
    void release(int unit) override;

    // Group g's fp32 masters gathered whole on every rank (world * chunk floats laid out from the group's
    // begin) in a buffer of this object on the store's device, valid until the next call of any method.
    // Every rank must call it; no unit may be held.
    const float* gather_masters(size_t g);
    // Bytes of the three slots.
    size_t buffer_bytes() const;

private:
    struct Slot {
        Arena weights, grads;
        int unit = -1;  // held now, or -1
        bool with_grads = false;
    };
    Slot& slot_of(size_t g);
    void gather_weights(size_t g, Slot& s);
    void reduce_grads(size_t g, Slot& s);

    DistContext& dc_;
    models::ParamStore& store_;
    Slot slots_[3];
};

}  // namespace llmt::train
