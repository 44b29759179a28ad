// Every compiled-in GEMM backend against a plain triple loop (fp64 accumulation) on random shapes with
// odd sizes, all four transpose combinations, leading dimensions larger than the rows, alpha and beta.
// Tolerance 1e-5 relative to the result's scale: K <= 300 fp32 products, blocked summation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "core/error.h"
#include "core/knobs.h"
#include "kernels/cpu/gemm.h"
#include "test_util.h"

namespace llmt::kernels::cpu {
namespace {

using test::randn;
using test::rel_err;

std::vector<double> naive(bool ta, bool tb, int M, int N, int K, float alpha, const std::vector<float>& A,
                          int lda, const std::vector<float>& B, int ldb, float beta,
                          const std::vector<float>& C, int ldc) {
    std::vector<double> out(C.begin(), C.end());
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) {
                const double a = ta ? A[static_cast<size_t>(k) * lda + i] : A[static_cast<size_t>(i) * lda + k];
                const double b = tb ? B[static_cast<size_t>(j) * ldb + k] : B[static_cast<size_t>(k) * ldb + j];
                s += a * b;
            }
            const double c = beta == 0.0f ? 0.0 : beta * static_cast<double>(C[static_cast<size_t>(i) * ldc + j]);
            out[static_cast<size_t>(i) * ldc + j] = alpha * s + c;
        }
    return out;
}

class GemmTest : public ::testing::TestWithParam<GemmBackend> {};

TEST_P(GemmTest, RandomShapes) {
    const GemmBackend be = GetParam();
    if (!gemm_backend_available(be)) GTEST_SKIP() << gemm_backend_name(be) << " not compiled in";
    const int sizes[] = {1, 3, 17, 63, 65, 128, 300};
    uint32_t seed = 100;
    int cases = 0;
    for (int M : sizes)
        for (int N : {1, 17, 65, 300})
            for (int K : {1, 3, 64, 129})
                for (int t = 0; t < 4; t++) {
                    if ((M * N * K) % 3 != t % 3 && M > 17) continue;  // thin the largest combinations
                    const bool ta = t & 1, tb = t & 2;
                    const int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
                    auto A = randn(static_cast<size_t>(ta ? K : M) * lda, seed++);
                    auto B = randn(static_cast<size_t>(tb ? N : K) * ldb, seed++);
                    auto C = randn(static_cast<size_t>(M) * ldc, seed++);
                    const float alpha = (t == 2) ? -0.5f : 1.0f, beta = (t == 1) ? 0.0f : (t == 3 ? 1.0f : 0.25f);
                    auto ref = naive(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
                    if (beta == 0.0f)  // beta = 0 must overwrite: NaN in C must not propagate
                        for (auto& x : C) x = NAN;
                    sgemm_with(be, ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
                    // Compare only the M x N window; the ldc padding columns must be untouched.
                    std::vector<float> got;
                    std::vector<double> want;
                    for (int i = 0; i < M; i++)
                        for (int j = 0; j < N; j++) {
                            got.push_back(C[static_cast<size_t>(i) * ldc + j]);
                            want.push_back(ref[static_cast<size_t>(i) * ldc + j]);
                        }
                    ASSERT_LT(rel_err(got, want), 1e-5)
                        << gemm_backend_name(be) << " M=" << M << " N=" << N << " K=" << K << " ta=" << ta
                        << " tb=" << tb;
                    ++cases;
                }
    EXPECT_GT(cases, 100);
}

TEST_P(GemmTest, ZeroK) {
    const GemmBackend be = GetParam();
    if (!gemm_backend_available(be)) GTEST_SKIP();
    std::vector<float> C = {1, 2, 3, 4};
    sgemm_with(be, false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 0.5f, C.data(), 2);
    EXPECT_EQ(C, (std::vector<float>{0.5f, 1.0f, 1.5f, 2.0f}));
}

INSTANTIATE_TEST_SUITE_P(Backends, GemmTest, ::testing::Values(GemmBackend::kOpenBlas, GemmBackend::kOneDnn),
                         [](const auto& p) { return std::string(gemm_backend_name(p.param)); });

// Every value of the knob LLMTRAIN_GEMM selects its backend (auto: oneDNN where built).
TEST(Gemm, KnobSelectsBackend) {
    {
        const ScopedKnob gemm(Knob::kGemm, "openblas");
        EXPECT_EQ(gemm_backend(), GemmBackend::kOpenBlas);
        EXPECT_STREQ(gemm_backend_name(), "openblas");
    }
    {
        const ScopedKnob gemm(Knob::kGemm, "onednn");
        EXPECT_EQ(gemm_backend(), GemmBackend::kOneDnn);
    }
    const ScopedKnob gemm(Knob::kGemm, "auto");
    EXPECT_EQ(gemm_backend(),
              gemm_backend_available(GemmBackend::kOneDnn) ? GemmBackend::kOneDnn : GemmBackend::kOpenBlas);
}

}  // namespace
}  // namespace llmt::kernels::cpu
