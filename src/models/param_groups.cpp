// ParamStore's sharded groups (ZeRO-3, param_store.h): the geometry of the groups and their chunks, the
// allocation of this rank's chunks alone, writes of whole tensors into the chunks, and the bound buffers
// that weight() and grad() resolve through.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/bf16.h"
#include "core/check.h"
#include "kernels/ops.h"
#include "models/param_store.h"

namespace llmt::models {

namespace {

constexpr size_t kChunkAlign = 16;  // floats: 64 bytes

}  // namespace

void ParamStore::shard_groups(const std::vector<ParamId>& firsts, int world, int rank) {
    LLMT_INTERNAL_CHECK(!params_.allocated() && !sharded_ && groups_.empty() && !specs_.empty(),
                        "param store: only a laid-out, unallocated store shards its groups");
    LLMT_INTERNAL_CHECK(world > 1 && rank >= 0 && rank < world, "param store: rank {} of {}", rank, world);
    LLMT_INTERNAL_CHECK(!firsts.empty() && firsts[0] == 0, "param store: the first group must start at tensor 0");
    const size_t numel = arena_numel();
    size_t local = 0;
    for (size_t g = 0; g < firsts.size(); ++g) {
        Group gr;
        gr.first = firsts[g];
        gr.last = g + 1 < firsts.size() ? firsts[g + 1] : specs_.size();
        LLMT_INTERNAL_CHECK(gr.first < gr.last && gr.last <= specs_.size(), "param store: group {} is [{}, {})", g,
                            gr.first, gr.last);
        gr.begin = params_.entry(gr.first).offset / sizeof(float);
        gr.end = gr.last < specs_.size() ? params_.entry(gr.last).offset / sizeof(float) : numel;
        const size_t per_rank = (gr.end - gr.begin + static_cast<size_t>(world) - 1) / static_cast<size_t>(world);
        gr.chunk = (per_rank + kChunkAlign - 1) / kChunkAlign * kChunkAlign;
        gr.local = local;
        local += gr.chunk;
        groups_.push_back(gr);
        for (ParamId id = gr.first; id < gr.last; ++id) group_of_.push_back(g);
    }
    world_ = world;
    rank_ = rank;
    bound_weights_.assign(groups_.size(), nullptr);
    bound_grads_.assign(groups_.size(), nullptr);
    params_lp_ = Arena();  // no whole compute copy: a group is converted when it is gathered
    // A frozen store's chunks are its weights in the compute dtype (no master, no gradient).
    masters_.add("masters", {static_cast<int64_t>(local)}, frozen_ ? dtype_ : DType::kF32);
    grads_ = Arena();
    if (!frozen_) grads_.add("grads", {static_cast<int64_t>(local)});
}

void ParamStore::allocate_groups() {
    masters_.allocate(true, device_);
    if (!frozen_) grads_.allocate(true, device_);
}

Tensor ParamStore::chunk_view(size_t g) const {
    const Arena::Entry& e = masters_.entry(0);
    const size_t elem = e.dtype == DType::kBF16 ? 2 : 4;
    return Tensor(static_cast<char*>(masters_.data()) + groups_[g].local * elem,
                  {static_cast<int64_t>(groups_[g].chunk)}, e.dtype, device_);
}

size_t ParamStore::chunk_first(size_t g) const {
    const Group& gr = groups_[g];
    return std::min(gr.begin + static_cast<size_t>(rank_) * gr.chunk, gr.end);
}

size_t ParamStore::chunk_last(size_t g) const {
    const Group& gr = groups_[g];
    return std::min(gr.begin + static_cast<size_t>(rank_ + 1) * gr.chunk, gr.end);
}

// The elements of tensor `id` that fall in this rank's chunk of its group.
void ParamStore::write_grouped(ParamId id, const float* host) {
    const size_t g = group_of_[id];
    const size_t first = params_.entry(id).offset / sizeof(float);
    int64_t numel = 1;
    for (int64_t d : params_.entry(id).shape) numel *= d;
    const size_t b = std::max(first, chunk_first(g)), e = std::min(first + static_cast<size_t>(numel), chunk_last(g));
    if (b >= e) return;
    const Tensor chunk = chunk_view(g);
    const auto n = static_cast<int64_t>(e - b);
    const size_t at = b - chunk_first(g);
    if (chunk.dtype == DType::kF32) {
        kernels::copy(Tensor(static_cast<float*>(chunk.data) + at, {n}, DType::kF32, device_),
                      Tensor(const_cast<float*>(host) + (b - first), {n}));
        return;
    }
    std::vector<uint16_t> lp(static_cast<size_t>(n));  // a frozen bf16 store
    for (int64_t i = 0; i < n; ++i)
        lp[static_cast<size_t>(i)] = bf16_from_float(host[(b - first) + static_cast<size_t>(i)]);
    kernels::copy(Tensor(static_cast<uint16_t*>(chunk.data) + at, {n}, DType::kBF16, device_),
                  Tensor(lp.data(), {n}, DType::kBF16));
}

void ParamStore::bind_group(size_t g, void* weights, float* grads) {
    LLMT_INTERNAL_CHECK(g < groups_.size() && weights, "param store: binding group {} of {}", g, groups_.size());
    bound_weights_[g] = weights;
    bound_grads_[g] = grads;
}

void ParamStore::unbind_group(size_t g) {
    bound_weights_[g] = nullptr;
    bound_grads_[g] = nullptr;
}

Tensor ParamStore::bound_view(ParamId id, const void* base, DType dtype, const char* what) const {
    const size_t g = group_of_[id];
    LLMT_INTERNAL_CHECK(base != nullptr, "param store: `{}`'s {} are used while group {} has none bound",
                        specs_[id].name, what, g);
    const Arena::Entry& e = params_.entry(id);
    const size_t elem = dtype == DType::kBF16 ? 2 : 4;
    Tensor t(const_cast<char*>(static_cast<const char*>(base)) + (e.offset / sizeof(float) - groups_[g].begin) * elem,
             {}, dtype, device_);
    t.ndim = static_cast<int>(e.shape.size());
    for (size_t d = 0; d < e.shape.size(); ++d) t.shape[d] = e.shape[d];
    return t;
}

}  // namespace llmt::models
