// ZeRO-3's per-unit gathers (zero3_gather.h).
#include "train/zero3_gather.h"

#include <algorithm>

#include "core/check.h"
#include "kernels/ops.h"
#include "models/param_store.h"
#include "train/dist_context.h"

namespace llmt::train {

namespace {

Tensor flat(void* p, size_t n, DType dt, Device d) { return Tensor(p, {static_cast<int64_t>(n)}, dt, d); }

size_t elem_bytes(DType dt) { return dt == DType::kBF16 ? 2 : 4; }

}  // namespace

Zero3Gather::Zero3Gather(DistContext& dc, models::ParamStore& store) : dc_(dc), store_(store) {
    LLMT_INTERNAL_CHECK(store.groups_sharded() && dc.active() && store.shard_world() == dc.world() &&
                            store.shard_rank() == dc.rank() && store.device() == dc.device(),
                        "ZeRO-3: the store must be sharded in groups over this process group, on its device");
    size_t need[3] = {0, 0, 0};
    for (size_t g = 0; g < store.groups().size(); ++g) {
        const size_t k = static_cast<size_t>(&slot_of(g) - slots_);
        need[k] = std::max(need[k], store.groups()[g].chunk * static_cast<size_t>(dc.world()));
    }
    for (size_t k = 0; k < 3; ++k) {
        if (need[k] == 0) continue;
        slots_[k].weights.add("weights", {static_cast<int64_t>(need[k])}, store.dtype());
        slots_[k].weights.allocate(true, store.device());
        slots_[k].grads.add("grads", {static_cast<int64_t>(need[k])});
        slots_[k].grads.allocate(true, store.device());
    }
}

Zero3Gather::Slot& Zero3Gather::slot_of(size_t g) {
    if (g == 0) return slots_[0];
    return g + 1 == store_.groups().size() ? slots_[1] : slots_[2];
}

size_t Zero3Gather::buffer_bytes() const {
    size_t n = 0;
    for (const Slot& s : slots_) n += s.weights.nbytes() + s.grads.nbytes();
    return n;
}

void Zero3Gather::acquire(int unit, bool grads) {
    const auto g = static_cast<size_t>(unit);
    LLMT_INTERNAL_CHECK(unit >= 0 && g < store_.groups().size(), "ZeRO-3: unit {} of {}", unit, store_.groups().size());
    Slot& s = slot_of(g);
    const size_t n = store_.groups()[g].chunk * static_cast<size_t>(dc_.world());
    if (s.unit != unit) {
        LLMT_INTERNAL_CHECK(s.unit < 0, "ZeRO-3: unit {} acquired while unit {} holds its buffer", unit, s.unit);
        gather_weights(g, s);
        s.unit = unit;
        s.with_grads = false;
    }
    if (grads && !s.with_grads) {
        kernels::zero(flat(s.grads.data(), n, DType::kF32, store_.device()));
        s.with_grads = true;
    }
    store_.bind_group(g, s.weights.data(), s.with_grads ? static_cast<float*>(s.grads.data()) : nullptr);
}

void Zero3Gather::release(int unit) {
    const auto g = static_cast<size_t>(unit);
    Slot& s = slot_of(g);
    LLMT_INTERNAL_CHECK(s.unit == unit, "ZeRO-3: unit {} released but not held", unit);
    if (s.with_grads) reduce_grads(g, s);
    store_.unbind_group(g);
    s.unit = -1;
    s.with_grads = false;
}

// This rank's chunk of the masters, in the compute dtype, at its place in the buffer; then the in-place
// all-gather fills the other ranks' places.
void Zero3Gather::gather_weights(size_t g, Slot& s) {
    const models::ParamStore::Group& gr = store_.groups()[g];
    const DType dt = store_.dtype();
    char* base = static_cast<char*>(s.weights.data());
    const Tensor mine = flat(base + static_cast<size_t>(dc_.rank()) * gr.chunk * elem_bytes(dt), gr.chunk, dt,
                             store_.device());
    const Tensor chunk = flat(store_.masters() + gr.local, gr.chunk, DType::kF32, store_.device());
    if (dt == DType::kF32) {
        kernels::copy(mine, chunk);
    } else {
        kernels::convert(mine, chunk);
    }
    dc_.pg().allgather(flat(base, gr.chunk * static_cast<size_t>(dc_.world()), dt, store_.device()), mine);
}

// Mean over ranks of the unit's gradient, chunk by chunk (in place), added into this rank's accumulator.
void Zero3Gather::reduce_grads(size_t g, Slot& s) {
    const models::ParamStore::Group& gr = store_.groups()[g];
    auto* base = static_cast<float*>(s.grads.data());
    const Tensor mine = flat(base + static_cast<size_t>(dc_.rank()) * gr.chunk, gr.chunk, DType::kF32, store_.device());
    dc_.pg().reduce_scatter(mine, flat(base, gr.chunk * static_cast<size_t>(dc_.world()), DType::kF32, store_.device()),
                            dist::ReduceOp::kAvg);
    const Tensor acc =
        flat(static_cast<float*>(store_.grads().data()) + gr.local, gr.chunk, DType::kF32, store_.device());
    kernels::residual_forward(acc, acc, mine);
}

const float* Zero3Gather::gather_masters(size_t g) {
    Slot& s = slot_of(g);
    LLMT_INTERNAL_CHECK(s.unit < 0, "ZeRO-3: gathering group {}'s masters while unit {} is held", g, s.unit);
    const models::ParamStore::Group& gr = store_.groups()[g];
    auto* base = static_cast<float*>(s.grads.data());
    const Tensor mine = flat(base + static_cast<size_t>(dc_.rank()) * gr.chunk, gr.chunk, DType::kF32, store_.device());
    kernels::copy(mine, flat(store_.masters() + gr.local, gr.chunk, DType::kF32, store_.device()));
    dc_.pg().allgather(flat(base, gr.chunk * static_cast<size_t>(dc_.world()), DType::kF32, store_.device()), mine);
    return base;
}

}  // namespace llmt::train
