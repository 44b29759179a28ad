#include "models/param_store.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/bf16.h"
#include "core/check.h"
#include "core/rng.h"
#include "kernels/ops.h"

namespace llmt::models {

ParamId ParamStore::add(ParamSpec spec) {
    LLMT_INTERNAL_CHECK(params_.size() == 0, "param store: add() after layout() ({})", spec.name);
    if (spec.hf.empty()) spec.hf.push_back({spec.name, spec.shape.empty() ? 1 : spec.shape[0]});
    specs_.push_back(std::move(spec));
    return specs_.size() - 1;
}

void ParamStore::layout(Device device, DType dtype, bool frozen) {
    LLMT_INTERNAL_CHECK(dtype == DType::kF32 || dtype == DType::kBF16,
                        "model: compute dtype must be f32 or bf16, got {}", dtype_name(dtype));
    device_ = device;
    dtype_ = dtype;
    frozen_ = frozen;
    // A frozen store keeps its weights in the compute dtype itself; a trained one fp32 masters.
    for (const auto& s : specs_) params_.add(s.name, s.shape, frozen ? dtype : DType::kF32);
    if (dtype_ == DType::kBF16 && !frozen)
        params_lp_.add("params", {static_cast<int64_t>(params_.nbytes() / sizeof(float))}, DType::kBF16);
}

void ParamStore::allocate() {
    if (groups_sharded()) return allocate_groups();
    params_.allocate(true, device_);
    if (!frozen_) grads_ = params_.mirror();
    if (params_lp_.size() > 0) params_lp_.allocate(true, device_);
}

void ParamStore::shard_masters(size_t begin, size_t end) {
    LLMT_INTERNAL_CHECK(params_.allocated() && !frozen_ && dtype_ == DType::kBF16 && !sharded_,
                        "param store: only an allocated, trained bf16 store shards its masters");
    LLMT_INTERNAL_CHECK(begin < end && end <= arena_numel(), "param store: master slice [{}, {}) of an arena of {}",
                        begin, end, arena_numel());
    masters_.add("masters", {static_cast<int64_t>(end - begin)});
    masters_.allocate(false, device_);
    kernels::copy(masters_.view(size_t{0}), Tensor(static_cast<float*>(params_.data()) + begin,
                                                   {static_cast<int64_t>(end - begin)}, DType::kF32, device_));
    // The same layout without its buffer: offsets, shapes and names stay, the whole fp32 arena goes.
    Arena layout;
    for (const auto& e : params_.entries()) layout.add(e.name, std::vector<int64_t>(e.shape), e.dtype);
    params_ = std::move(layout);
    mbegin_ = begin;
    mend_ = end;
    sharded_ = true;
}

float* ParamStore::masters() const {
    return static_cast<float*>(sharded_ || groups_sharded() ? masters_.data() : params_.data());
}

void ParamStore::write_f32(ParamId id, const float* host) {
    if (sharded_) return write_sharded(id, host);
    if (groups_sharded()) return write_grouped(id, host);
    Tensor t = params_.view(id);
    const int64_t n = t.numel();
    if (t.dtype == DType::kF32) {
        kernels::copy(t, Tensor(const_cast<float*>(host), {n}));
        return;
    }
    std::vector<uint16_t> lp(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) lp[static_cast<size_t>(i)] = bf16_from_float(host[i]);
    kernels::copy(t, Tensor(lp.data(), {n}, DType::kBF16));
}

// Sharded masters: the compute copy of the whole tensor, and the masters of its elements inside the slice.
void ParamStore::write_sharded(ParamId id, const float* host) {
    const Tensor w = weight(id);
    const int64_t n = w.numel();
    std::vector<uint16_t> lp(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) lp[static_cast<size_t>(i)] = bf16_from_float(host[i]);
    kernels::copy(w, Tensor(lp.data(), {n}, DType::kBF16));
    const size_t first = params_.entry(id).offset / sizeof(float), last = first + static_cast<size_t>(n);
    const size_t b = std::max(first, mbegin_), e = std::min(last, mend_);
    if (b >= e) return;
    kernels::copy(Tensor(static_cast<float*>(masters_.data()) + (b - mbegin_), {static_cast<int64_t>(e - b)},
                         DType::kF32, device_),
                  Tensor(const_cast<float*>(host) + (b - first), {static_cast<int64_t>(e - b)}));
}

std::vector<float> ParamStore::read_f32(ParamId id) const {
    LLMT_INTERNAL_CHECK(!sharded_ && !groups_sharded(),
                        "param store: `{}`'s fp32 masters are sharded over the ranks: gather them first",
                        specs_[id].name);
    Tensor t = params_.view(id);
    const int64_t n = t.numel();
    std::vector<float> out(static_cast<size_t>(n));
    if (t.dtype == DType::kF32) {
        kernels::copy(Tensor(out.data(), {n}), t);
        return out;
    }
    std::vector<uint16_t> lp(static_cast<size_t>(n));
    kernels::copy(Tensor(lp.data(), {n}, DType::kBF16), t);
    for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = float_from_bf16(lp[static_cast<size_t>(i)]);
    return out;
}

Tensor ParamStore::weight(ParamId id) const {
    if (groups_sharded()) return bound_view(id, bound_weights_[group_of_[id]], dtype_, "weights");
    if (!params_lp_.allocated()) return params_.view(id);
    // The compute copy at the same index (the fp32 arena may be unallocated: sharded masters).
    const Arena::Entry& e = params_.entry(id);
    Tensor t(static_cast<uint16_t*>(params_lp_.data()) + e.offset / sizeof(float), {}, DType::kBF16, device_);
    t.ndim = static_cast<int>(e.shape.size());
    for (size_t d = 0; d < e.shape.size(); ++d) t.shape[d] = e.shape[d];
    return t;
}

Tensor ParamStore::grad(ParamId id) const {
    if (frozen_) return Tensor();
    if (groups_sharded()) return bound_view(id, bound_grads_[group_of_[id]], DType::kF32, "gradients");
    return grads_.view(id);
}

Tensor ParamStore::compute_params() const {
    return params_lp_.allocated() ? params_lp_.view(size_t{0}) : Tensor();
}

void ParamStore::sync_compute_params() {
    if (!params_lp_.allocated() || groups_sharded()) return;  // ZeRO-3: converted when a group is gathered
    if (sharded_) {  // this rank's slice; the rest comes from the other ranks (an all-gather)
        const auto n = static_cast<int64_t>(mend_ - mbegin_);
        kernels::convert(Tensor(static_cast<uint16_t*>(params_lp_.data()) + mbegin_, {n}, DType::kBF16, device_),
                         masters_.view(size_t{0}));
        return;
    }
    kernels::convert(params_lp_.view(size_t{0}),
                     Tensor(params_.data(), {static_cast<int64_t>(params_.nbytes() / sizeof(float))}, DType::kF32,
                            device_));
}

int64_t ParamStore::num_parameters() const {
    int64_t n = 0;
    for (const auto& s : specs_) {
        int64_t k = s.live_rows();
        for (size_t i = 1; i < s.shape.size(); ++i) k *= s.shape[i];
        n += k;
    }
    return n;
}

void ParamStore::init_random(uint64_t seed, double std, double residual_std) {
    for (size_t i = 0; i < specs_.size(); ++i) {
        const auto& s = specs_[i];
        int64_t n = 1;
        for (int64_t d : params_.entry(i).shape) n *= d;
        // Drawn on the host and copied: the same values on every backend.
        std::vector<float> host(static_cast<size_t>(n));
        float* p = host.data();
        switch (s.init) {
            case ParamInit::kZeros: std::memset(p, 0, static_cast<size_t>(n) * sizeof(float)); break;
            case ParamInit::kOnes:
                for (int64_t k = 0; k < n; ++k) p[k] = 1.f;
                break;
            case ParamInit::kKaimingUniform: {
                // fan_in: every dimension but the first (a convolution's (OC, KH, KW, C): KH*KW*C), as torch.
                int64_t fan_in = 1;
                for (size_t d = 1; d < s.shape.size(); ++d) fan_in *= s.shape[d];
                const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
                CounterRng rng(seed, i);
                for (int64_t k = 0; k < n; ++k)
                    p[k] = static_cast<float>((2.0 * rng.uniform(static_cast<uint64_t>(k)) - 1.0) * bound);
                break;
            }
            case ParamInit::kNormal:
            case ParamInit::kNormalResidual: {
                const double sd = s.init == ParamInit::kNormal ? std : residual_std;
                CounterRng rng(seed, i);  // one stream per tensor: independent of threads and order
                const int64_t live = s.shape.empty() ? n : s.live_rows() * (n / s.shape[0]);  // padding stays 0
#pragma omp parallel for schedule(static)
                for (int64_t k = 0; k < live; ++k)
                    p[k] = static_cast<float>(sd * rng.normal(static_cast<uint64_t>(k)));
                std::memset(p + live, 0, static_cast<size_t>(n - live) * sizeof(float));
                break;
            }
        }
        write_f32(i, p);
    }
    sync_compute_params();
}

}  // namespace llmt::models
