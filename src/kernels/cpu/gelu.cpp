// GELU (tanh approximation) forward/backward, vectorised with tanh(u) = 1 - 2 / (1 + exp(2u)) on the
// simd.h exp; the scalar path is the readable reference.
#include "kernels/cpu/gelu.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/simd.h"

namespace llmt::kernels::cpu {
namespace {

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluCube = 0.044715f;
constexpr size_t kBlock = 8192;  // elements per OpenMP work item

void gelu_forward_scalar(float* out, const float* inp, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const float x = inp[i];
        const float u = kGeluScale * (x + kGeluCube * x * x * x);
        out[i] = 0.5f * x * (1.0f + std::tanh(u));
    }
}

void gelu_backward_scalar(float* dinp, const float* inp, const float* dout, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const float x = inp[i];
        const float u = kGeluScale * (x + kGeluCube * x * x * x);
        const float t = std::tanh(u);
        const float sech2 = 1.0f - t * t;
        const float g = 0.5f * (1.0f + t) + 0.5f * x * sech2 * kGeluScale * (1.0f + 3.0f * kGeluCube * x * x);
        dinp[i] = g * dout[i];
    }
}

LLMT_TARGET_AVX512 inline __m512 tanh16(__m512 u) {
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 e = simd::exp16(_mm512_add_ps(u, u));
    return _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(one, e)));
}

LLMT_TARGET_AVX512 void gelu_forward_avx512(float* out, const float* inp, size_t n) {
    const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
    const __m512 s = _mm512_set1_ps(kGeluScale), k = _mm512_set1_ps(kGeluCube);
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? 0xffff : static_cast<__mmask16>((1u << (n - i)) - 1);
        const __m512 x = _mm512_maskz_loadu_ps(m, inp + i);
        const __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
        const __m512 t = tanh16(_mm512_mul_ps(s, _mm512_fmadd_ps(k, x3, x)));
        _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(_mm512_mul_ps(half, x), _mm512_add_ps(one, t)));
    }
}

LLMT_TARGET_AVX512 void gelu_backward_avx512(float* dinp, const float* inp, const float* dout, size_t n) {
    const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
    const __m512 s = _mm512_set1_ps(kGeluScale), k = _mm512_set1_ps(kGeluCube);
    const __m512 k3 = _mm512_set1_ps(3.0f * kGeluCube);
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? 0xffff : static_cast<__mmask16>((1u << (n - i)) - 1);
        const __m512 x = _mm512_maskz_loadu_ps(m, inp + i);
        const __m512 x2 = _mm512_mul_ps(x, x);
        const __m512 t = tanh16(_mm512_mul_ps(s, _mm512_fmadd_ps(_mm512_mul_ps(k, x2), x, x)));
        const __m512 sech2 = _mm512_fnmadd_ps(t, t, one);
        // g = 0.5 (1 + t) + 0.5 x sech2 s (1 + 3k x^2)
        const __m512 inner = _mm512_mul_ps(_mm512_mul_ps(s, sech2), _mm512_fmadd_ps(k3, x2, one));
        const __m512 g = _mm512_mul_ps(half, _mm512_fmadd_ps(x, inner, _mm512_add_ps(one, t)));
        _mm512_mask_storeu_ps(dinp + i, m, _mm512_mul_ps(g, _mm512_maskz_loadu_ps(m, dout + i)));
    }
}

LLMT_TARGET_AVX2 inline __m256 tanh8(__m256 u) {
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 e = simd::exp8(_mm256_add_ps(u, u));
    return _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(one, e)));
}

LLMT_TARGET_AVX2 void gelu_forward_avx2(float* out, const float* inp, size_t n) {
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    const __m256 s = _mm256_set1_ps(kGeluScale), k = _mm256_set1_ps(kGeluCube);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(inp + i);
        const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
        const __m256 t = tanh8(_mm256_mul_ps(s, _mm256_fmadd_ps(k, x3, x)));
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(half, x), _mm256_add_ps(one, t)));
    }
    gelu_forward_scalar(out + i, inp + i, n - i);
}

LLMT_TARGET_AVX2 void gelu_backward_avx2(float* dinp, const float* inp, const float* dout, size_t n) {
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    const __m256 s = _mm256_set1_ps(kGeluScale), k = _mm256_set1_ps(kGeluCube);
    const __m256 k3 = _mm256_set1_ps(3.0f * kGeluCube);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(inp + i);
        const __m256 x2 = _mm256_mul_ps(x, x);
        const __m256 t = tanh8(_mm256_mul_ps(s, _mm256_fmadd_ps(_mm256_mul_ps(k, x2), x, x)));
        const __m256 sech2 = _mm256_fnmadd_ps(t, t, one);
        const __m256 inner = _mm256_mul_ps(_mm256_mul_ps(s, sech2), _mm256_fmadd_ps(k3, x2, one));
        const __m256 g = _mm256_mul_ps(half, _mm256_fmadd_ps(x, inner, _mm256_add_ps(one, t)));
        _mm256_storeu_ps(dinp + i, _mm256_mul_ps(g, _mm256_loadu_ps(dout + i)));
    }
    gelu_backward_scalar(dinp + i, inp + i, dout + i, n - i);
}

}  // namespace

void gelu_forward(float* out, const float* inp, size_t N) {
    const simd::Isa isa = simd::isa();
    const long blocks = static_cast<long>((N + kBlock - 1) / kBlock);
#pragma omp parallel for schedule(static)
    for (long b = 0; b < blocks; b++) {
        const size_t i0 = static_cast<size_t>(b) * kBlock, n = std::min(kBlock, N - i0);
        if (isa == simd::Isa::kAvx512) gelu_forward_avx512(out + i0, inp + i0, n);
        else if (isa == simd::Isa::kAvx2) gelu_forward_avx2(out + i0, inp + i0, n);
        else gelu_forward_scalar(out + i0, inp + i0, n);
    }
}

void gelu_backward(float* dinp, const float* inp, const float* dout, size_t N) {
    const simd::Isa isa = simd::isa();
    const long blocks = static_cast<long>((N + kBlock - 1) / kBlock);
#pragma omp parallel for schedule(static)
    for (long b = 0; b < blocks; b++) {
        const size_t i0 = static_cast<size_t>(b) * kBlock, n = std::min(kBlock, N - i0);
        if (isa == simd::Isa::kAvx512) gelu_backward_avx512(dinp + i0, inp + i0, dout + i0, n);
        else if (isa == simd::Isa::kAvx2) gelu_backward_avx2(dinp + i0, inp + i0, dout + i0, n);
        else gelu_backward_scalar(dinp + i0, inp + i0, dout + i0, n);
    }
}

}  // namespace llmt::kernels::cpu
