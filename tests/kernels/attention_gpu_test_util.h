// Helpers shared by the GPU attention tests (flash_attention_test, cudnn_attention_test): a printed,
// replayable seed, bf16-rounded random inputs, NaN-poisoned device buffers and the error measures both
// judge against the fp32 CPU op.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "kernels/cuda/runtime.h"
#include "support/compare.h"

namespace llmt::kernels::attn_test {

// The test binary's base seed: LLMT_TEST_SEED, else random; printed once as "[tag] seed N".
inline uint32_t base_seed(const char* tag) {
    static const uint32_t s = [tag] {
        const char* e = std::getenv("LLMT_TEST_SEED");
        const uint32_t v = e ? static_cast<uint32_t>(std::strtoul(e, nullptr, 10)) : std::random_device{}();
        std::printf("[%s] seed %u (replay with LLMT_TEST_SEED=%u)\n", tag, v, v);
        return v;
    }();
    return s;
}

// Normal(0, sigma) values rounded to bf16: the bits for the GPU, the same values as floats for the CPU.
inline void random_bf16(size_t n, uint32_t seed, float sigma, std::vector<uint16_t>& bits, std::vector<float>& vals) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, sigma);
    bits.resize(n);
    vals.resize(n);
    for (size_t i = 0; i < n; i++) {
        bits[i] = bf16_from_float(d(rng));
        vals[i] = float_from_bf16(bits[i]);
    }
}

inline std::vector<float> widen(const std::vector<uint16_t>& h) {
    std::vector<float> f(h.size());
    for (size_t i = 0; i < h.size(); i++) f[i] = float_from_bf16(h[i]);
    return f;
}

// n elements of T on the current device, NaN (all bits set) until written.
template <typename T>
class DevBuf {
public:
    explicit DevBuf(size_t n) : n_(n) {
        LLMT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)));
        poison();
    }
    ~DevBuf() { cudaFree(p_); }
    DevBuf(const DevBuf&) = delete;
    DevBuf& operator=(const DevBuf&) = delete;
    T* get() const { return p_; }
    __nv_bfloat16* bf() const { return reinterpret_cast<__nv_bfloat16*>(p_); }
    void poison() { LLMT_CUDA_CHECK(cudaMemset(p_, 0xff, n_ * sizeof(T))); }  // NaN in bf16 and fp32
    void upload(const std::vector<T>& v) {
        LLMT_CUDA_CHECK(cudaMemcpy(p_, v.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
    }
    std::vector<T> download() const {
        std::vector<T> v(n_);
        LLMT_CUDA_CHECK(cudaMemcpy(v.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
        return v;
    }

private:
    T* p_ = nullptr;
    size_t n_;
};

struct Err {
    double norm_rel = 0, max_rel = 0, max_abs = 0;
    bool finite = true;
};

// Error of got vs ref over the elements pick(i) selects (so q, k and v columns of dqkv are judged apart):
// ||got - ref|| / ||ref||, max |got - ref| / max |ref|, max |got - ref|, and whether got is all finite.
template <typename Pick>
Err compare(const std::vector<float>& got, const std::vector<float>& ref, Pick pick) {
    double num = 0, den = 0, dmax = 0, rmax = 1e-30;
    Err e;
    if (!support::expect_comparable(got, ref, "compare")) {
        e.norm_rel = e.max_rel = e.max_abs = support::not_comparable();
        return e;
    }
    for (size_t i = 0; i < ref.size(); i++) {
        if (!pick(i)) continue;
        const double d = static_cast<double>(got[i]) - ref[i];
        e.finite = e.finite && std::isfinite(got[i]);
        num += d * d;
        den += static_cast<double>(ref[i]) * ref[i];
        dmax = std::max(dmax, std::fabs(d));
        rmax = std::max(rmax, std::fabs(static_cast<double>(ref[i])));
    }
    e.norm_rel = std::sqrt(num / std::max(den, 1e-30));
    e.max_rel = dmax / rmax;
    e.max_abs = dmax;
    return e;
}

// The check of one output of a bf16 attention against its reference: every value finite, the norm-relative
// and the max-relative error within their bounds. `label` (the test, the case, what against what) is
// printed with the errors and names a failure.
inline void expect_within(const std::string& label, const Err& e, double tol_norm, double tol_max) {
    std::printf("%s norm rel %.2e  max rel %.2e (tol %.0e / %.0e)\n", label.c_str(), e.norm_rel, e.max_rel, tol_norm,
                tol_max);
    EXPECT_TRUE(e.finite) << label << ": non-finite value (an element left unwritten?)";
    EXPECT_LE(e.norm_rel, tol_norm) << label;
    EXPECT_LE(e.max_rel, tol_max) << label;
}

}  // namespace llmt::kernels::attn_test
