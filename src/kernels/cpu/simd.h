// SIMD helpers for runtime CPU dispatch: functions marked LLMT_TARGET_AVX512 / LLMT_TARGET_AVX2 are
// compiled for those ISAs inside a baseline x86-64 binary and called only after core/cpu_features.h
// says the CPU has them. exp follows Cephes expf (range reduction by ln2, degree-6 polynomial;
// relative error ~2 ulp over the clamped range), as do most vectorised libm's.
#pragma once

#include <immintrin.h>

// GCC 12's AVX-512 intrinsics (_mm512_undefined_ps and users: reduce, max, extract) trip
// -W(maybe-)uninitialized when inlined (GCC bug 105593). The pragma applies to the kernel .cpp files
// that include this header, none of which rely on those warnings for their own code paths.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <cmath>

#include "core/cpu_features.h"

#define LLMT_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))
#define LLMT_TARGET_AVX2 __attribute__((target("avx2,fma")))

namespace llmt::kernels::cpu::simd {

enum class Isa { kScalar, kAvx2, kAvx512 };

// The widest ISA our kernels may use on this CPU, or a narrower one chosen with the knob
// LLMTRAIN_CPU_ISA=auto|scalar|avx2|avx512 (core/knobs.h; tests run every path in one process with
// ScopedKnob). Thread-safe; never throws.
Isa isa();
const char* isa_name(Isa isa);

namespace detail {
inline constexpr float kExpHi = 88.3762626647949f;
inline constexpr float kExpLo = -87.3365447505531f;  // exp(kExpLo) is the smallest normal float
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693359375f;
inline constexpr float kLn2Lo = -2.12194440e-4f;
inline constexpr float kP0 = 1.9875691500E-4f, kP1 = 1.3981999507E-3f, kP2 = 8.3334519073E-3f,
                       kP3 = 4.1665795894E-2f, kP4 = 1.6666665459E-1f, kP5 = 5.0000001201E-1f;
}  // namespace detail

LLMT_TARGET_AVX512 inline __m512 exp16(__m512 x) {
    using namespace detail;
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(kExpLo)), _mm512_set1_ps(kExpHi));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
    __m512 p = _mm512_set1_ps(kP0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP5));
    __m512 r2 = _mm512_mul_ps(r, r);
    p = _mm512_fmadd_ps(p, r2, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

LLMT_TARGET_AVX2 inline __m256 exp8(__m256 x) {
    using namespace detail;
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kExpLo)), _mm256_set1_ps(kExpHi));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
    __m256 p = _mm256_set1_ps(kP0);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP5));
    __m256 r2 = _mm256_mul_ps(r, r);
    p = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    // 2^n: n is in [-127, 128) after the clamp; build the float's exponent field directly.
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

LLMT_TARGET_AVX512 inline float hsum16(__m512 v) { return _mm512_reduce_add_ps(v); }
LLMT_TARGET_AVX512 inline float hmax16(__m512 v) { return _mm512_reduce_max_ps(v); }
LLMT_TARGET_AVX2 inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
LLMT_TARGET_AVX2 inline float hmax8(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

}  // namespace llmt::kernels::cpu::simd

// Compiles a function three times (AVX-512, AVX2+FMA, baseline) and picks one at load time (GCC
// ifunc); for loops the compiler vectorises well by itself (dot products, axpy).
#define LLMT_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
