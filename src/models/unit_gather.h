// ZeRO-3's per-layer gathers as the models see them: a model whose parameters are sharded in groups
// (ParamStore::shard_groups, one group per "unit": a transformer's embeddings, each layer, its final norm
// and head) calls acquire() before a unit's weights are read (forward, recompute, backward) and release()
// when it is done with them. The trainer implements it (train/zero3.h) with all-gathers and
// reduce-scatters; without one the model's whole weights are in its store and nothing is called.
#pragma once

namespace llmt::models {

class UnitGather {
public:
    virtual ~UnitGather() = default;
    // Unit `unit`'s weights are needed from now on; with `grads` its gradients too (a zeroed buffer the
    // kernels accumulate into). Acquiring a unit already held keeps it (adding the gradient buffer when
    // asked). Every rank must make the same calls in the same order (they are collectives).
    virtual void acquire(int unit, bool grads) = 0;
    // Unit `unit` is done: its gradients, when it had a buffer, are reduced over the ranks into this rank's
    // chunk accumulator; its buffers go back for reuse.
    virtual void release(int unit) = 0;
    // A hint that `unit` is acquired next: its gather may start now and overlap the current unit's compute.
    virtual void prefetch(int unit) { (void)unit; }

protected:
    UnitGather() = default;
    UnitGather(const UnitGather&) = default;
    UnitGather& operator=(const UnitGather&) = default;
};

}  // namespace llmt::models
