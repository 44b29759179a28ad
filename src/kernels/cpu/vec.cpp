// Vectorised row primitives (vec.h), one implementation per ISA, chosen per call from simd::isa().
#include "kernels/cpu/vec.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/simd.h"

namespace llmt::kernels::cpu::vec {
namespace {

constexpr int kChunk = 1024;  // a multiple of 32


float max_scalar(const float* x, int n) {
    float m = -std::numeric_limits<float>::infinity();
    for (int i = 0; i < n; i++) m = std::max(m, x[i]);
    return m;
}
float exp_sum_scalar(float* e, const float* x, int n, float m) {
    double s = 0.0;
    for (int i = 0; i < n; i++) {
        const float v = std::exp(x[i] - m);
        if (e) e[i] = v;
        s += v;
    }
    return static_cast<float>(s);
}
void scale_scalar(float* x, int n, float s) {
    for (int i = 0; i < n; i++) x[i] *= s;
}

LLMT_TARGET_AVX512 inline __mmask16 tail_mask(int left) {
    return left >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << left) - 1);
}
LLMT_TARGET_AVX512 float max_avx512(const float* x, int n) {
    __m512 m = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    for (int i = 0; i < n; i += 16) {
        const __mmask16 k = tail_mask(n - i);
        m = _mm512_mask_max_ps(m, k, m, _mm512_maskz_loadu_ps(k, x + i));
    }
    return simd::hmax16(m);
}
LLMT_TARGET_AVX512 float exp_sum_avx512(float* e, const float* x, int n, float mx) {
    // fp32 lanes within a chunk of kChunk elements, fp64 across chunks: a 50k-column row summed in
    // fp32 alone drifts by ~1e-5 relative.
    const __m512 m = _mm512_set1_ps(mx);
    double total = 0.0;
    for (int c0 = 0; c0 < n; c0 += kChunk) {
        const int c1 = std::min(n, c0 + kChunk);
        __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
        int i = c0;
        for (; i + 32 <= c1; i += 32) {
            const __m512 e0 = simd::exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), m));
            const __m512 e1 = simd::exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), m));
            if (e) {
                _mm512_storeu_ps(e + i, e0);
                _mm512_storeu_ps(e + i + 16, e1);
            }
            s0 = _mm512_add_ps(s0, e0);
            s1 = _mm512_add_ps(s1, e1);
        }
        for (; i < c1; i += 16) {
            const __mmask16 k = tail_mask(c1 - i);
            const __m512 v = simd::exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), m));
            if (e) _mm512_mask_storeu_ps(e + i, k, v);
            s0 = _mm512_mask_add_ps(s0, k, s0, v);
        }
        total += simd::hsum16(_mm512_add_ps(s0, s1));
    }
    return static_cast<float>(total);
}
LLMT_TARGET_AVX512 void scale_avx512(float* x, int n, float s) {
    const __m512 v = _mm512_set1_ps(s);
    for (int i = 0; i < n; i += 16) {
        const __mmask16 k = tail_mask(n - i);
        _mm512_mask_storeu_ps(x + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), v));
    }
}

LLMT_TARGET_AVX2 float max_avx2(const float* x, int n) {
    __m256 m = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
    int i = 0;
    for (; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
    return std::max(simd::hmax8(m), max_scalar(x + i, n - i));
}
LLMT_TARGET_AVX2 float exp_sum_avx2(float* e, const float* x, int n, float mx) {
    const __m256 m = _mm256_set1_ps(mx);
    double total = 0.0;
    int i = 0;
    for (int c0 = 0; c0 < n; c0 += kChunk) {
        const int c1 = std::min(n, c0 + kChunk);
        __m256 s = _mm256_setzero_ps();
        for (i = c0; i + 8 <= c1; i += 8) {
            const __m256 v = simd::exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
            if (e) _mm256_storeu_ps(e + i, v);
            s = _mm256_add_ps(s, v);
        }
        total += simd::hsum8(s);
        if (c1 == n) break;
    }
    return static_cast<float>(total + exp_sum_scalar(e ? e + i : nullptr, x + i, n - i, mx));
}

LLMT_TARGET_AVX2 void scale_avx2(float* x, int n, float s) {
    const __m256 v = _mm256_set1_ps(s);
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), v));
    scale_scalar(x + i, n - i, s);
}

}  // namespace

float row_max(const float* x, int n) {
    switch (simd::isa()) {
        case simd::Isa::kAvx512: return max_avx512(x, n);
        case simd::Isa::kAvx2: return max_avx2(x, n);
        default: return max_scalar(x, n);
    }
}

float row_exp_sum(float* e, const float* x, int n, float m) {
    switch (simd::isa()) {
        case simd::Isa::kAvx512: return exp_sum_avx512(e, x, n, m);
        case simd::Isa::kAvx2: return exp_sum_avx2(e, x, n, m);
        default: return exp_sum_scalar(e, x, n, m);
    }
}

void row_scale(float* x, int n, float s) {
    switch (simd::isa()) {
        case simd::Isa::kAvx512: scale_avx512(x, n, s); break;
        case simd::Isa::kAvx2: scale_avx2(x, n, s); break;
        default: scale_scalar(x, n, s);
    }
}

}  // namespace llmt::kernels::cpu::vec
