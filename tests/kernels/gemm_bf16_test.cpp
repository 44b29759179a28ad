// bf16 GEMM (kernels/cpu/gemm_bf16.h), native (oneDNN on AVX512_BF16) and emulated, against an fp64 triple loop
// over the operands rounded to bf16 by core/bf16.h (the reference rounding: round to nearest even, as torch's
// .to(torch.bfloat16)). Products of two bf16 values are exact in fp32, so the only error left is fp32
// summation: |err| <= K * 2^-24 * sum_k |a_k b_k| (the standard bound for recursive summation; blocked sums do
// better); the tolerance is that bound. A second check shows the rounding happens: against the fp32 operands the
// result is off by ~2^-9 relative, far outside fp32 noise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/bf16.h"
#include "core/knobs.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/matmul.h"
#include "test_util.h"

namespace llmt::kernels::cpu {
namespace {

using test::randn;

float bf16_round(float x) { return float_from_bf16(bf16_from_float(x)); }

struct Ref {
    std::vector<double> value, scale;  // the exact result on bf16 operands; sum |a b| per element
};

Ref reference(bool ta, bool tb, int M, int N, int K, const std::vector<float>& A, int lda, const std::vector<float>& B,
              int ldb, float beta, const std::vector<float>& C, int ldc, bool round) {
    Ref r{std::vector<double>(C.begin(), C.end()), std::vector<double>(C.size(), 0.0)};
    auto q = [&](float x) { return static_cast<double>(round ? bf16_round(x) : x); };
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0, sa = 0;
            for (int k = 0; k < K; k++) {
                const double a = q(ta ? A[static_cast<size_t>(k) * lda + i] : A[static_cast<size_t>(i) * lda + k]);
                const double b = q(tb ? B[static_cast<size_t>(j) * ldb + k] : B[static_cast<size_t>(k) * ldb + j]);
                s += a * b;
                sa += std::fabs(a * b);
            }
            const size_t at = static_cast<size_t>(i) * ldc + j;
            r.value[at] = s + (beta == 0.0f ? 0.0 : static_cast<double>(C[at]));
            r.scale[at] = sa + (beta == 0.0f ? 0.0 : std::fabs(static_cast<double>(C[at])));
        }
    return r;
}

void check_path(bool native) {
    uint32_t seed = 7;
    for (int M : {1, 5, 37, 130})
        for (int N : {1, 19, 64, 77})
            for (int K : {1, 16, 70, 300})
                for (int t = 0; t < 8; t++) {
                    const bool ta = t & 1, tb = t & 2;
                    const float beta = (t & 4) ? 1.0f : 0.0f;
                    const int lda = (ta ? M : K) + 2, ldb = (tb ? K : N) + 3, ldc = N + 1;
                    auto A = randn(static_cast<size_t>(ta ? K : M) * lda, seed++);
                    auto B = randn(static_cast<size_t>(tb ? N : K) * ldb, seed++);
                    auto C = randn(static_cast<size_t>(M) * ldc, seed++);
                    const Ref ref = reference(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, true);
                    if (beta == 0.0f)
                        for (int i = 0; i < M; i++)
                            for (int j = 0; j < N; j++) C[static_cast<size_t>(i) * ldc + j] = NAN;  // not read
                    gemm_bf16_with(native, ta, tb, M, N, K, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
                    for (int i = 0; i < M; i++)
                        for (int j = 0; j < N; j++) {
                            const size_t at = static_cast<size_t>(i) * ldc + j;
                            const double tol = (K + 1) * std::ldexp(1.0, -24) * ref.scale[at] + 1e-30;
                            ASSERT_NEAR(C[at], ref.value[at], tol)
                                << "M" << M << " N" << N << " K" << K << " ta" << ta << " tb" << tb << " beta" << beta
                                << " at (" << i << "," << j << ")";
                        }
                }
}

TEST(GemmBf16, RoundingMatchesTheScalarReference) {
    // Ties (0x3f808000 sits halfway between two bf16 values), carries into the exponent, signs, NaN, the
    // largest finite values; 37 columns so the vector path has a scalar tail.
    std::vector<float> src;
    const uint32_t bits[] = {0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0xbf808001u, 0x7f7fffffu, 0x477fffffu,
                             0x7fc00000u, 0x00800000u, 0x3f800000u};
    for (int i = 0; i < 37 * 3; i++) {
        uint32_t u = bits[i % 9] ^ (static_cast<uint32_t>(i / 9) << 13);
        float f;
        std::memcpy(&f, &u, 4);
        src.push_back(f);
    }
    for (float x : randn(37 * 5, 3)) src.push_back(x);
    const int rows = static_cast<int>(src.size() / 37);
    std::vector<uint16_t> out(src.size());
    round_to_bf16(src.data(), rows, 37, 37, out.data());
    for (size_t i = 0; i < src.size(); i++) {
        if (std::isnan(src[i])) {
            EXPECT_TRUE(std::isnan(float_from_bf16(out[i])));
            continue;
        }
        EXPECT_EQ(out[i], bf16_from_float(src[i])) << "element " << i;
    }
}

TEST(GemmBf16, NativeMatchesExactProductsWithFp32Sums) {
    if (!gemm_bf16_native()) GTEST_SKIP() << "no native bf16 GEMM: " << gemm_bf16_emulation_reason();
    check_path(true);
}

TEST(GemmBf16, EmulatedMatchesExactProductsWithFp32Sums) { check_path(false); }

TEST(GemmBf16, RoundsTheOperandsUnlikeSgemm) {
    const int M = 64, N = 64, K = 256;
    const auto A = randn(static_cast<size_t>(M) * K, 1), B = randn(static_cast<size_t>(K) * N, 2);
    std::vector<float> c16(static_cast<size_t>(M) * N), c32(c16.size());
    gemm_bf16(false, false, M, N, K, A.data(), K, B.data(), N, 0.0f, c16.data(), N);
    sgemm(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, c32.data(), N);
    double max_diff = 0, max_abs = 0;
    for (size_t i = 0; i < c16.size(); i++) {
        max_diff = std::max(max_diff, std::fabs(static_cast<double>(c16[i]) - c32[i]));
        max_abs = std::max(max_abs, std::fabs(static_cast<double>(c32[i])));
    }
    // bf16 keeps 8 significant bits: each product is off by up to ~2^-8 relative, ~sqrt(K) * 2^-9 * |a||b|
    // summed; fp32 GEMMs agree to ~1e-6 of the scale. Between the two: bf16 is in use, and not broken.
    EXPECT_GT(max_diff, 1e-4 * max_abs);
    EXPECT_LT(max_diff, 2e-2 * max_abs);
}

TEST(GemmBf16, MatmulPrecisionSwitchesTheLinearLayers) {
    const int BT = 32, C = 96, OC = 48;
    const auto inp = randn(static_cast<size_t>(BT) * C, 4), w = randn(static_cast<size_t>(OC) * C, 5);
    std::vector<float> out32(static_cast<size_t>(BT) * OC), out16(out32.size()), expect(out32.size());
    matmul_forward(out32.data(), inp.data(), w.data(), nullptr, BT, C, OC);
    set_matmul_precision(MatmulPrecision::kBF16);
    matmul_forward(out16.data(), inp.data(), w.data(), nullptr, BT, C, OC);
    set_matmul_precision(MatmulPrecision::kF32);
    EXPECT_EQ(matmul_precision(), MatmulPrecision::kF32);
    gemm_bf16(false, true, BT, OC, C, inp.data(), C, w.data(), C, 0.0f, expect.data(), OC);
    EXPECT_EQ(out16, expect);  // the bf16 layer is exactly gemm_bf16 (same kernel, same order)
    EXPECT_NE(out16, out32);
}

}  // namespace
}  // namespace llmt::kernels::cpu
