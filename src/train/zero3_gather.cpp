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
    const size_t groups = store.groups().size();
    size_t need[3] = {0, 0, 0};
    for (size_t g = 0; g < groups; ++g) {
        const size_t k = kind_of(g, groups);
        need[k] = std::max(need[k], store.groups()[g].chunk * static_cast<size_t>(dc.world()));
    }
    for (size_t i = 0; i < 4; ++i) {
        const size_t n = need[std::min<size_t>(i, 2)];
        if (n == 0) continue;
        slots_[i].weights.add("weights", {static_cast<int64_t>(n)}, store.dtype());
        slots_[i].weights.allocate(true, store.device());
        if (store.frozen()) continue;  // LoRA's base: no gradients
        slots_[i].grads.add("grads", {static_cast<int64_t>(n)});
        slots_[i].grads.allocate(true, store.device());
    }
}

Zero3Gather::~Zero3Gather() {
    if (inflight_.valid()) inflight_.wait();  // never leave the helper thread writing into a freed buffer
}

size_t Zero3Gather::kind_of(size_t g, size_t groups) {
    if (g == 0) return 0;
    return g + 1 == groups ? 1 : 2;
}

Zero3Gather::Slot* Zero3Gather::slot_for(size_t g) {
    const size_t k = kind_of(g, store_.groups().size());
    Slot* candidates[2] = {&slots_[k], k == 2 ? &slots_[3] : nullptr};
    for (Slot* s : candidates)
        if (s && s->unit == static_cast<int>(g)) return s;
    for (Slot* s : candidates)
        if (s && !s->held) return s;
    return nullptr;
}

size_t Zero3Gather::buffer_bytes() const {
    size_t n = 0;
    for (const Slot& s : slots_) n += s.weights.nbytes() + s.grads.nbytes();
    return n;
}

void Zero3Gather::join() {
    if (inflight_.valid()) inflight_.get();
    if (inflight_device_) dc_.pg().join_async();
    inflight_device_ = false;
}

void Zero3Gather::acquire(int unit, bool grads) {
    const auto g = static_cast<size_t>(unit);
    LLMT_INTERNAL_CHECK(unit >= 0 && g < store_.groups().size(), "ZeRO-3: unit {} of {}", unit,
                        store_.groups().size());
    join();  // a prefetch (of this unit or not) is complete before the unit is read or another collective runs
    Slot* s = slot_for(g);
    LLMT_INTERNAL_CHECK(s != nullptr, "ZeRO-3: unit {} acquired while every buffer of its kind is held", unit);
    if (s->unit != unit) {
        auto [whole, mine] = stage_chunk(g, *s);
        dc_.pg().allgather(whole, mine);
        s->unit = unit;
        s->with_grads = false;
        ++counts_.gathers;
    } else if (!s->held) {
        ++counts_.gathers;  // gathered by prefetch()
        ++counts_.prefetched;
    }
    s->held = true;
    if (grads && !store_.frozen() && !s->with_grads) {
        kernels::zero(flat(s->grads.data(), store_.groups()[g].chunk * static_cast<size_t>(dc_.world()), DType::kF32,
                           store_.device()));
        s->with_grads = true;
    }
    store_.bind_group(g, s->weights.data(), s->with_grads ? static_cast<float*>(s->grads.data()) : nullptr);
}

void Zero3Gather::prefetch(int unit) {
    const auto g = static_cast<size_t>(unit);
    if (unit < 0 || g >= store_.groups().size()) return;
    Slot* s = slot_for(g);
    if (!s || s->unit == unit) return;  // no free buffer, or gathered already
    join();
    s->unit = -1;  // until the gather below has been started
    const std::pair<Tensor, Tensor> t = stage_chunk(g, *s);
    if (dc_.pg().has_async()) {
        dc_.pg().allgather_async(t.first, t.second);
        inflight_device_ = true;
    } else {
        dist::ProcessGroup* pg = &dc_.pg();
        inflight_ = std::async(std::launch::async, [pg, t] { pg->allgather(t.first, t.second); });
    }
    s->unit = unit;
    s->with_grads = false;
}

void Zero3Gather::release(int unit) {
    const auto g = static_cast<size_t>(unit);
    Slot* s = slot_for(g);
    LLMT_INTERNAL_CHECK(s && s->unit == unit && s->held, "ZeRO-3: unit {} released but not held", unit);
    join();  // the prefetch in flight first: one collective at a time
    if (s->with_grads) reduce_grads(g, *s);
    store_.unbind_group(g);
    s->unit = -1;
    s->held = false;
    s->with_grads = false;
}

// This rank's chunk of the masters, in the compute dtype, at its place in the buffer; the in-place all-gather
// of (whole, mine) then fills the other ranks' places.
std::pair<Tensor, Tensor> Zero3Gather::stage_chunk(size_t g, Slot& s) {
    const models::ParamStore::Group& gr = store_.groups()[g];
    const DType dt = store_.dtype();
    char* base = static_cast<char*>(s.weights.data());
    const Tensor mine = flat(base + static_cast<size_t>(dc_.rank()) * gr.chunk * elem_bytes(dt), gr.chunk, dt,
                             store_.device());
    const Tensor chunk = store_.chunk_view(g);  // fp32 masters, or a frozen store's weights in dt
    if (chunk.dtype == dt) {
        kernels::copy(mine, chunk);
    } else {
        kernels::convert(mine, chunk);
    }
    return {flat(base, gr.chunk * static_cast<size_t>(dc_.world()), dt, store_.device()), mine};
}

// Mean over ranks of the unit's gradient, chunk by chunk (in place), added into this rank's accumulator.
void Zero3Gather::reduce_grads(size_t g, Slot& s) {
    const models::ParamStore::Group& gr = store_.groups()[g];
    auto* base = static_cast<float*>(s.grads.data());
    const Tensor mine =
        flat(base + static_cast<size_t>(dc_.rank()) * gr.chunk, gr.chunk, DType::kF32, store_.device());
    dc_.pg().reduce_scatter(mine,
                            flat(base, gr.chunk * static_cast<size_t>(dc_.world()), DType::kF32, store_.device()),
                            dist::ReduceOp::kAvg);
    const Tensor acc =
        flat(static_cast<float*>(store_.grads().data()) + gr.local, gr.chunk, DType::kF32, store_.device());
    kernels::residual_forward(acc, acc, mine);
}

void Zero3Gather::forget_unheld() {
    join();
    for (Slot& s : slots_)
        if (!s.held) s.unit = -1;
}

const float* Zero3Gather::gather_masters(size_t g) {
    join();
    Slot* s = slot_for(g);
    LLMT_INTERNAL_CHECK(s && !s->held && !store_.frozen(), "ZeRO-3: gathering group {}'s masters while its buffer is "
                        "held, or of a frozen store", g);
    s->unit = -1;  // the gradient buffer is overwritten; the weights buffer stays, but is no longer a gather
    const models::ParamStore::Group& gr = store_.groups()[g];
    auto* base = static_cast<float*>(s->grads.data());
    const Tensor mine =
        flat(base + static_cast<size_t>(dc_.rank()) * gr.chunk, gr.chunk, DType::kF32, store_.device());
    kernels::copy(mine, flat(store_.masters() + gr.local, gr.chunk, DType::kF32, store_.device()));
    dc_.pg().allgather(flat(base, gr.chunk * static_cast<size_t>(dc_.world()), DType::kF32, store_.device()), mine);
    return base;
}

}  // namespace llmt::train
