// The fp32 CPU kernels against the fp64 references of ref_ops.h (whose backward formulas
// gradcheck_test.cpp verifies by finite differences), including the grad conventions: parameter grads
// +=, activation grads =, residual-stream grads +=. Sizes include odd extents to hit SIMD tails.
// Tolerances: fp32 rounding is 6e-8 per operation; with dot products of <= 100 terms and the ~2 ulp exp
// of simd.h, errors relative to the output's scale stay below ~1e-6. 2e-5 leaves margin for summation
// order (OpenMP, GEMM blocking) while any indexing or formula mistake gives errors of order 1.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/knobs.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/classifier.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/encoder.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/residual.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/swiglu.h"
#include "kernels/cpu/simd.h"
#include "ref_ops.h"
#include "test_util.h"

namespace llmt::kernels {
namespace {

using test::cast;
using test::randint;
using test::randn;
using test::rel_err;
constexpr double kTol = 2e-5;

// Runs body once per SIMD path this CPU has (scalar, AVX2, AVX-512), then restores the default.
template <typename Fn>
void for_each_isa(Fn body) {
    for (cpu::simd::Isa want : {cpu::simd::Isa::kScalar, cpu::simd::Isa::kAvx2, cpu::simd::Isa::kAvx512}) {
        const ScopedKnob isa(Knob::kCpuIsa, cpu::simd::isa_name(want));
        if (cpu::simd::isa() != want) continue;  // this CPU lacks it
        SCOPED_TRACE(cpu::simd::isa_name(want));
        body();
    }
}

// a[i] - b[i] for the += checks: what the kernel added on top of a known prefill.
std::vector<float> minus(const std::vector<float>& a, const std::vector<float>& b) {
    std::vector<float> r(a.size());
    for (size_t i = 0; i < a.size(); i++) r[i] = a[i] - b[i];
    return r;
}

TEST(Kernels, Encoder) {
    const int B = 3, T = 7, C = 19, V = 11, maxT = 9;
    auto wte = randn(V * C, 1), wpe = randn(maxT * C, 2), dout = randn(B * T * C, 3);
    auto inp = randint(B * T, V, 4);
    std::vector<float> out(B * T * C);
    cpu::encoder_forward(out.data(), inp.data(), wte.data(), wpe.data(), B, T, C);
    std::vector<double> ref_out(out.size());
    auto wte_d = cast<double>(wte), wpe_d = cast<double>(wpe);
    ref::encoder_forward(ref_out.data(), inp.data(), wte_d.data(), wpe_d.data(), B, T, C);
    EXPECT_LT(rel_err(out, ref_out), kTol);

    auto dwte0 = randn(V * C, 5), dwpe0 = randn(maxT * C, 6);  // prefill: parameter grads accumulate
    auto dwte = dwte0, dwpe = dwpe0;
    cpu::encoder_backward(dwte.data(), dwpe.data(), dout.data(), inp.data(), B, T, C);
    std::vector<double> rdwte(V * C, 0.0), rdwpe(maxT * C, 0.0);
    auto dout_d = cast<double>(dout);
    ref::encoder_backward(rdwte.data(), rdwpe.data(), dout_d.data(), inp.data(), B, T, C);
    EXPECT_LT(rel_err(minus(dwte, dwte0), rdwte), kTol);
    EXPECT_LT(rel_err(minus(dwpe, dwpe0), rdwpe), kTol);
}

TEST(Kernels, LayerNorm) {
    const int B = 2, T = 5, C = 67;
    auto x = randn(B * T * C, 7, 2.0f), w = randn(C, 8), b = randn(C, 9), dout = randn(B * T * C, 10);
    for (auto& v : x) v += 3.0f;  // a mean far from 0 checks the two-pass variance
    std::vector<float> out(x.size()), mean(B * T), rstd(B * T);
    cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), 1e-5f, B, T, C);
    auto xd = cast<double>(x), wd = cast<double>(w), bd = cast<double>(b), dd = cast<double>(dout);
    std::vector<double> rout(x.size()), rmean(B * T), rrstd(B * T);
    ref::layernorm_forward(rout.data(), rmean.data(), rrstd.data(), xd.data(), wd.data(), bd.data(), B * T, C);
    EXPECT_LT(rel_err(out, rout), kTol);
    EXPECT_LT(rel_err(mean, rmean), kTol);
    EXPECT_LT(rel_err(rstd, rrstd), kTol);

    auto dx0 = randn(x.size(), 11), dw0 = randn(C, 12), db0 = randn(C, 13);
    auto dx = dx0, dw = dw0, db = db0;
    cpu::layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), mean.data(),
                            rstd.data(), B, T, C);
    std::vector<double> rdx(x.size()), rdw(C), rdb(C);
    ref::layernorm_backward(rdx.data(), rdw.data(), rdb.data(), dd.data(), xd.data(), wd.data(), B * T, C);
    EXPECT_LT(rel_err(minus(dx, dx0), rdx), kTol);  // residual stream: +=
    EXPECT_LT(rel_err(minus(dw, dw0), rdw), kTol);
    EXPECT_LT(rel_err(minus(db, db0), rdb), kTol);
}

class MatmulShapes : public ::testing::TestWithParam<std::tuple<int, int, int, bool>> {};

TEST_P(MatmulShapes, ForwardBackward) {
    const auto [N, C, OC, with_bias] = GetParam();
    auto x = randn(N * C, 14), w = randn(OC * C, 15), b = randn(OC, 16), dout = randn(N * OC, 17);
    std::vector<float> out(N * OC, NAN);  // beta = 0 must not read the old contents
    cpu::matmul_forward(out.data(), x.data(), w.data(), with_bias ? b.data() : nullptr, N, C, OC);
    auto xd = cast<double>(x), wd = cast<double>(w), bd = cast<double>(b), dd = cast<double>(dout);
    std::vector<double> rout(N * OC);
    ref::matmul_forward(rout.data(), xd.data(), wd.data(), with_bias ? bd.data() : nullptr, N, C, OC);
    EXPECT_LT(rel_err(out, rout), kTol);

    std::vector<float> dx(N * C, NAN);  // activation grad: =
    auto dw0 = randn(OC * C, 18), db0 = randn(OC, 19);
    auto dw = dw0, db = db0;
    cpu::matmul_backward(dx.data(), dw.data(), with_bias ? db.data() : nullptr, dout.data(), x.data(),
                         w.data(), N, C, OC);
    std::vector<double> rdx(N * C), rdw(OC * C), rdb(OC);
    ref::matmul_backward(rdx.data(), rdw.data(), rdb.data(), dd.data(), xd.data(), wd.data(), N, C, OC);
    EXPECT_LT(rel_err(dx, rdx), kTol);
    EXPECT_LT(rel_err(minus(dw, dw0), rdw), kTol);
    if (with_bias) {
        EXPECT_LT(rel_err(minus(db, db0), rdb), kTol);
    }
}

INSTANTIATE_TEST_SUITE_P(Kernels, MatmulShapes,
                         ::testing::Values(std::make_tuple(1, 1, 1, true), std::make_tuple(3, 17, 5, true),
                                           std::make_tuple(64, 63, 65, false),
                                           std::make_tuple(33, 48, 300, true),
                                           std::make_tuple(17, 3, 1, true)));

// (B, T, C, NH, KV): C = NH * HS; KV < NH is grouped-query attention (qkv rows C + 2*KV*HS wide).
class AttentionShapes : public ::testing::TestWithParam<std::tuple<int, int, int, int, int>> {};

TEST_P(AttentionShapes, ForwardBackward) {
    const auto [B, T, C, NH, KV] = GetParam();
    const size_t C3 = static_cast<size_t>(C) + 2 * static_cast<size_t>(KV) * (C / NH);
    auto qkv = randn(static_cast<size_t>(B) * T * C3, 20), dout = randn(static_cast<size_t>(B) * T * C, 21);
    // The GEMM backend picks the formulation: oneDNN -> blocked GEMM tiles, OpenBLAS -> row-wise loops.
    for (cpu::GemmBackend be : {cpu::GemmBackend::kOpenBlas, cpu::GemmBackend::kOneDnn}) {
        if (!cpu::gemm_backend_available(be)) continue;
        const ScopedKnob gemm(Knob::kGemm, cpu::gemm_backend_name(be));
        SCOPED_TRACE(cpu::gemm_backend_name(be));
        std::vector<float> out(dout.size()), lse(static_cast<size_t>(B) * NH * T);
        cpu::attention_forward(out.data(), lse.data(), qkv.data(), B, T, C, NH, KV);
        auto qd = cast<double>(qkv), dd = cast<double>(dout);
        std::vector<double> rout(out.size()), att;
        ref::attention_forward(rout.data(), att, qd.data(), B, T, C, NH, KV);
        EXPECT_LT(rel_err(out, rout), kTol);

        std::vector<float> dqkv(qkv.size(), NAN);  // activation grad: =
        cpu::attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), B, T, C, NH, KV);
        std::vector<double> rdqkv(qkv.size());
        ref::attention_backward(rdqkv.data(), dd.data(), qd.data(), att, B, T, C, NH, KV);
        EXPECT_LT(rel_err(dqkv, rdqkv), kTol);
    }
}

INSTANTIATE_TEST_SUITE_P(Kernels, AttentionShapes,
                         ::testing::Values(std::make_tuple(1, 1, 4, 1, 1), std::make_tuple(2, 7, 12, 3, 3),
                                           std::make_tuple(3, 65, 64, 4, 4), std::make_tuple(1, 17, 34, 2, 2),
                                           std::make_tuple(2, 130, 32, 2, 2),  // 3 query blocks, ragged
                                           // grouped-query (NH = 4 on KV = 2, and multi-query KV = 1), head sizes
                                           // 16 and 32, T not a multiple of the 64-row blocks
                                           std::make_tuple(2, 70, 64, 4, 2), std::make_tuple(1, 130, 128, 4, 1),
                                           std::make_tuple(3, 33, 64, 4, 1), std::make_tuple(2, 65, 128, 4, 2)));

TEST(Kernels, AttentionCachedMatchesFull) {
    // Decoding positions t0..t0+Tq-1 against a cache longer than needed equals the full forward's rows, for
    // multi-head (KV = NH) and grouped-query (KV = 2, 1) caches.
    for (const int KV : {4, 2, 1}) {
        SCOPED_TRACE(KV);
        const int B = 2, Tmax = 40, C = 32, NH = 4, t0 = 29, Tq = 3, T = t0 + Tq, C3 = C + 2 * KV * (C / NH);
        auto qkv = randn(static_cast<size_t>(B) * Tmax * C3, 50);
        std::vector<float> full(static_cast<size_t>(B) * T * C), lse(static_cast<size_t>(B) * NH * T);
        std::vector<float> packed(static_cast<size_t>(B) * T * C3);  // the first T positions, contiguous
        for (int b = 0; b < B; b++)
            std::copy_n(qkv.begin() + static_cast<long>(b) * Tmax * C3, T * C3,
                        packed.begin() + static_cast<long>(b) * T * C3);
        cpu::attention_forward(full.data(), lse.data(), packed.data(), B, T, C, NH, KV);
        std::vector<float> out(static_cast<size_t>(B) * Tq * C);
        cpu::attention_forward_cached(out.data(), qkv.data(), B, t0, Tq, Tmax, C, NH, KV);
        for (int b = 0; b < B; b++)
            for (int i = 0; i < Tq * C; i++)
                ASSERT_NEAR(out[static_cast<size_t>(b) * Tq * C + i],
                            full[(static_cast<size_t>(b) * T + t0) * C + i],
                            1e-5);  // same math, different summation order (GEMM tiles vs loops)
    }
}

TEST(Kernels, AttentionLargeScoresStable) {
    // Scores of several hundred: a softmax without max-subtraction overflows fp32 exp here.
    const int B = 1, T = 9, C = 8, NH = 1;
    auto qkv = randn(B * T * 3 * C, 22, 10.0f);
    std::vector<float> out(B * T * C), lse(B * NH * T);
    cpu::attention_forward(out.data(), lse.data(), qkv.data(), B, T, C, NH, NH);
    auto qd = cast<double>(qkv);
    std::vector<double> rout(out.size()), att;
    ref::attention_forward(rout.data(), att, qd.data(), B, T, C, NH);
    for (float v : out) ASSERT_TRUE(std::isfinite(v));
    EXPECT_LT(rel_err(out, rout), 1e-4);  // scores ~ 1e3 in fp32 lose ~1e-4 relative in exp's argument
}

// RMSNorm, and the residual add fused in front of it: fp32 kernels vs the fp64 references; dinp and dweight
// accumulate (+=) onto a prefill. Widths 67 (odd: SIMD tails) and 256.
TEST(Kernels, RmsNorm) {
    for (const int C : {67, 256}) {
        SCOPED_TRACE(C);
        const int B = 2, T = 5;
        const float eps = 1e-5f;
        auto x = randn(B * T * C, 60, 2.0f), w = randn(C, 61), dout = randn(B * T * C, 62);
        std::vector<float> out(x.size(), NAN), rstd(B * T, NAN);
        cpu::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), eps, B, T, C);
        auto xd = cast<double>(x), wd = cast<double>(w), dd = cast<double>(dout);
        std::vector<double> rout(x.size()), rrstd(B * T);
        ref::rmsnorm_forward(rout.data(), rrstd.data(), xd.data(), wd.data(), static_cast<double>(eps), B * T, C);
        EXPECT_LT(rel_err(out, rout), kTol);
        EXPECT_LT(rel_err(rstd, rrstd), kTol);

        auto dx0 = randn(x.size(), 63), dw0 = randn(C, 64);
        auto dx = dx0, dw = dw0;
        cpu::rmsnorm_backward(dx.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), B, T, C);
        std::vector<double> rdx(x.size()), rdw(C);
        ref::rmsnorm_backward(rdx.data(), rdw.data(), dd.data(), xd.data(), wd.data(), static_cast<double>(eps), B * T,
                              C);
        EXPECT_LT(rel_err(minus(dx, dx0), rdx), kTol);  // residual stream: +=
        EXPECT_LT(rel_err(minus(dw, dw0), rdw), kTol);

        // The fused residual add: the same values as residual_forward then rmsnorm_forward; residual_out may
        // be one of its inputs.
        auto a = randn(B * T * C, 65), b = randn(B * T * C, 66);
        std::vector<float> h(x.size()), o2(x.size()), r2(B * T), h_sep(x.size()), o_sep(x.size()), r_sep(B * T);
        cpu::residual_rmsnorm_forward(h.data(), o2.data(), r2.data(), a.data(), b.data(), w.data(), eps, B, T, C);
        cpu::residual_forward(h_sep.data(), a.data(), b.data(), h.size());
        cpu::rmsnorm_forward(o_sep.data(), r_sep.data(), h_sep.data(), w.data(), eps, B, T, C);
        EXPECT_EQ(h, h_sep);
        EXPECT_EQ(o2, o_sep);
        EXPECT_EQ(r2, r_sep);
        cpu::residual_rmsnorm_forward(a.data(), o2.data(), r2.data(), a.data(), b.data(), w.data(), eps, B, T, C);
        EXPECT_EQ(a, h_sep);  // in place on inp1
        EXPECT_EQ(o2, o_sep);
    }
}

TEST(Kernels, SwiGlu) {
    const int N = 7, F = 37;
    auto x = randn(static_cast<size_t>(N) * 2 * F, 70, 3.0f), dout = randn(static_cast<size_t>(N) * F, 71);
    x[0] = 0.0f;
    x[1] = 100.0f;  // exp(-x) underflows to 0: silu(x) = x
    x[2] = -100.0f; // exp(-x) overflows to inf: silu(x) = -0
    std::vector<float> out(static_cast<size_t>(N) * F, NAN), dx(x.size(), NAN);
    cpu::swiglu_forward(out.data(), x.data(), N, F);
    cpu::swiglu_backward(dx.data(), dout.data(), x.data(), N, F);
    auto xd = cast<double>(x), dd = cast<double>(dout);
    std::vector<double> rout(out.size()), rdx(x.size());
    ref::swiglu_forward(rout.data(), xd.data(), N, F);
    ref::swiglu_backward(rdx.data(), dd.data(), xd.data(), N, F);
    EXPECT_LT(rel_err(out, rout), kTol);
    EXPECT_LT(rel_err(dx, rdx), kTol);
    for (float v : dx) ASSERT_TRUE(std::isfinite(v));
    auto y = x;  // dinp may alias inp
    cpu::swiglu_backward(y.data(), dout.data(), y.data(), N, F);
    EXPECT_EQ(y, dx);
}

// RoPE on the q and k heads of a grouped-query qkv (NH = 4, KV = 2; v untouched), at positions pos0.. of the
// table (a decode step's rows) and, backward, 0..; then forward followed by backward restores the input (a
// rotation's transpose is its inverse).
TEST(Kernels, Rope) {
    for (const int HS : {16, 32, 6}) {
        SCOPED_TRACE(HS);
        const int B = 2, T = 9, NH = 4, KV = 2, C3 = (NH + 2 * KV) * HS, pos0 = 5;
        const auto table = ref::rope_table(T + pos0 + 3, HS);
        const auto td = cast<double>(table);
        auto x = randn(static_cast<size_t>(B) * T * C3, 72);
        auto y = x;
        cpu::rope_forward(y.data(), table.data(), B, T, NH, KV, HS, pos0);
        auto ry = cast<double>(x);
        ref::rope_forward(ry.data(), td.data(), B, T, NH, KV, HS, pos0);
        EXPECT_LT(rel_err(y, ry), kTol);
        for (int r = 0; r < B * T; r++)
            for (int c = (NH + KV) * HS; c < C3; c++)
                ASSERT_EQ(y[static_cast<size_t>(r) * C3 + c], x[static_cast<size_t>(r) * C3 + c]) << "v changed";

        auto g = randn(x.size(), 73);
        auto dg = g;
        cpu::rope_backward(dg.data(), table.data(), B, T, NH, KV, HS);
        auto rg = cast<double>(g);
        ref::rope_backward(rg.data(), td.data(), B, T, NH, KV, HS);
        EXPECT_LT(rel_err(dg, rg), kTol);

        auto z = x;
        cpu::rope_forward(z.data(), table.data(), B, T, NH, KV, HS, 0);
        cpu::rope_backward(z.data(), table.data(), B, T, NH, KV, HS);
        EXPECT_LT(rel_err(z, x), kTol);
    }
}

TEST(Kernels, Gelu) {
    const size_t N = 3 * 8192 + 21;  // several OpenMP blocks plus a SIMD tail
    auto x = randn(N, 23, 3.0f), dout = randn(N, 24);
    x[0] = 0.0f;
    x[1] = 20.0f;
    x[2] = -20.0f;  // saturated tanh on both sides
    for_each_isa([&] {
        std::vector<float> out(N), dx(N);
        cpu::gelu_forward(out.data(), x.data(), N);
        cpu::gelu_backward(dx.data(), x.data(), dout.data(), N);
        std::vector<double> rout(N), rdx(N);
        for (size_t i = 0; i < N; i++) {
            rout[i] = ref::gelu(static_cast<double>(x[i]));
            rdx[i] = ref::gelu_grad(static_cast<double>(x[i])) * dout[i];
        }
        EXPECT_LT(rel_err(out, rout), kTol);
        EXPECT_LT(rel_err(dx, rdx), kTol);
        // In place, as the model runs it.
        auto y = x;
        cpu::gelu_forward(y.data(), y.data(), N);
        EXPECT_EQ(y, out);
    });
}

TEST(Kernels, Residual) {
    const size_t N = 1001;
    auto a = randn(N, 25), b = randn(N, 26), d = randn(N, 27), d1 = randn(N, 28), d2 = randn(N, 29);
    std::vector<float> out(N);
    cpu::residual_forward(out.data(), a.data(), b.data(), N);
    auto e1 = d1, e2 = d2;
    cpu::residual_backward(e1.data(), e2.data(), d.data(), N);
    for (size_t i = 0; i < N; i++) {
        EXPECT_EQ(out[i], a[i] + b[i]);
        EXPECT_EQ(e1[i], d1[i] + d[i]);  // residual stream: +=
        EXPECT_EQ(e2[i], d2[i] + d[i]);
    }
}

class ClassifierShapes : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(ClassifierShapes, LossAndGrad) {
    const auto [N, V, Vp] = GetParam();
    auto logits = randn(static_cast<size_t>(N) * Vp, 30, 4.0f);
    auto y = randint(N, V, 31);
    y[0] = V - 1;
    if (N > 2) y[2] = -1;  // ignored position
    const float scale = 1.0f / N;
    auto ld = cast<double>(logits);
    std::vector<double> rloss(N), rdlogits(logits.size());
    ref::classifier<double>(rloss.data(), rdlogits.data(), ld.data(), y.data(), scale, N, V, Vp);

    for_each_isa([&] {
        std::vector<float> loss(N, NAN);
        cpu::classifier_forward(loss.data(), logits.data(), y.data(), 1, N, V, Vp);
        EXPECT_LT(rel_err(loss, rloss), kTol);

        std::vector<float> loss2(N, NAN);
        auto buf = logits;
        cpu::classifier_forward_backward(loss2.data(), buf.data(), y.data(), scale, 1, N, V, Vp);
        EXPECT_LT(rel_err(loss2, rloss), kTol);
        EXPECT_LT(rel_err(buf, rdlogits), kTol);
        for (int r = 0; r < N; r++)
            for (int i = V; i < Vp; i++) ASSERT_EQ(buf[static_cast<size_t>(r) * Vp + i], 0.0f);

        std::vector<float> probs(logits.size());
        cpu::softmax_forward(probs.data(), logits.data(), 1, N, V, Vp);
        for (int r = 0; r < N; r++) {
            double s = 0;
            for (int i = 0; i < Vp; i++) s += probs[static_cast<size_t>(r) * Vp + i];
            EXPECT_NEAR(s, 1.0, 1e-5);
        }
    });
}

INSTANTIATE_TEST_SUITE_P(Kernels, ClassifierShapes,
                         ::testing::Values(std::make_tuple(1, 1, 1), std::make_tuple(3, 17, 17),
                                           std::make_tuple(5, 37, 48), std::make_tuple(4, 1000, 1024),
                                           std::make_tuple(7, 50257, 50304)));

TEST(Kernels, ClassifierExtremeLogits) {
    for_each_isa([] {
        // Logits of +-1e4: exp must not overflow and the loss must equal the margin.
        const int V = 5;
        std::vector<float> logits = {1e4f, -1e4f, 0.0f, 1e4f - 3.0f, 5.0f};
        std::vector<int32_t> y = {3};
        std::vector<float> loss(1);
        cpu::classifier_forward(loss.data(), logits.data(), y.data(), 1, 1, V, V);
        EXPECT_NEAR(loss[0], 3.0 + std::log1p(std::exp(-3.0)), 1e-3);
    });
}

TEST(Kernels, AdamW) {
    const size_t N = 40000 + 7;
    auto p = randn(N, 32), m = randn(N, 33, 0.1f), g = randn(N, 34);
    auto v = randn(N, 35, 0.1f);
    for (auto& x : v) x = x * x;
    AdamWParams hp;
    hp.lr = 3e-3f;
    hp.beta1 = 0.9f;
    hp.beta2 = 0.95f;
    hp.eps = 1e-8f;
    hp.weight_decay = 0.1f;
    hp.grad_scale = 0.5f;
    hp.step = 7;
    auto p2 = p, m2 = m, v2 = v;
    cpu::adamw_update(p2.data(), m2.data(), v2.data(), g.data(), N, hp);
    std::vector<double> rp(N), rm(N), rv(N);
    const double bc1 = 1 - std::pow(0.9, 7), bc2 = 1 - std::pow(0.95, 7);
    for (size_t i = 0; i < N; i++) {
        const double gi = 0.5 * g[i];
        rm[i] = 0.9 * m[i] + 0.1 * gi;
        rv[i] = 0.95 * v[i] + 0.05 * gi * gi;
        const double pi = p[i] * (1 - 3e-3 * 0.1);
        rp[i] = pi - 3e-3 / bc1 * rm[i] / (std::sqrt(rv[i]) / std::sqrt(bc2) + 1e-8);
    }
    EXPECT_LT(rel_err(m2, rm), kTol);
    EXPECT_LT(rel_err(v2, rv), kTol);
    EXPECT_LT(rel_err(minus(p2, p), minus(cast<float>(rp), p)), 1e-4);  // the update itself, ~lr in size
    EXPECT_LT(rel_err(p2, rp), kTol);
}

TEST(Kernels, Dropout) {
    const size_t N = 100003;
    auto x = randn(N, 40), d = randn(N, 41);
    for (auto& v : x) v = std::fabs(v) + 0.1f;  // nonzero, so a zero output means "dropped"
    const float p = 0.25f;
    std::vector<float> y(N), dx(N);
    cpu::dropout_forward(y.data(), x.data(), p, 42, N);
    cpu::dropout_backward(dx.data(), d.data(), p, 42, N);
    size_t kept = 0;
    for (size_t i = 0; i < N; i++) {
        const bool keep = y[i] != 0.0f;
        kept += keep;
        ASSERT_FLOAT_EQ(y[i], keep ? x[i] / (1 - p) : 0.0f);
        ASSERT_FLOAT_EQ(dx[i], keep ? d[i] / (1 - p) : 0.0f);  // the backward recomputes the same mask
    }
    // Binomial(N, 0.75): sd = sqrt(N * 0.75 * 0.25) ~ 137, so +-1% (1000) is > 7 sd.
    EXPECT_NEAR(static_cast<double>(kept) / N, 1 - p, 0.01);
    std::vector<float> y2(N);
    cpu::dropout_forward(y2.data(), x.data(), p, 43, N);
    EXPECT_NE(y, y2);  // another seed, another mask
    cpu::dropout_forward(y2.data(), x.data(), 0.0f, 43, N);
    EXPECT_EQ(y2, x);  // p = 0 is the identity
}

TEST(Kernels, SumSquaresAndScale) {
    const size_t N = 3 * 65536 + 5;
    auto x = randn(N, 36);
    double ref = 0;
    for (float v : x) ref += static_cast<double>(v) * v;
    EXPECT_NEAR(cpu::sum_squares(x.data(), N), ref, 1e-9 * ref);  // fp64 accumulation
    cpu::scale_inplace(x.data(), N, 0.5f);
    EXPECT_NEAR(cpu::sum_squares(x.data(), N), 0.25 * ref, 1e-9 * ref);
}

// run.deterministic (docs/config.md): kernels that combine per-thread partial sums must do it in a fixed
// order. Four threads on any machine (oversubscribed on two cores, where threads finish in varying
// order): LayerNorm's backward, when it summed its partials in a critical section, gave 12 distinct
// dweight bit patterns in 2000 identical calls on the 2-core dev machine; every call must give one.
TEST(Kernels, ParallelReductionsAreBitwiseRepeatable) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(4);
    const int B = 4, T = 64, C = 64;
    auto x = randn(B * T * C, 40), dout = randn(B * T * C, 41), w = randn(C, 42), b = randn(C, 43);
    std::vector<float> out(x.size()), mean(B * T), rstd(B * T);
    cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), 1e-5f, B, T, C);
    std::vector<float> first_dw;
    for (int rep = 0; rep < 2000; ++rep) {
        std::vector<float> dx(x.size(), 0.f), dw(C, 0.f), db(C, 0.f);
        cpu::layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), mean.data(),
                                rstd.data(), B, T, C);
        if (rep == 0) first_dw = dw;
        ASSERT_EQ(std::memcmp(dw.data(), first_dw.data(), C * sizeof(float)), 0) << "call " << rep;
    }
    const size_t N = 9 * 65536 + 7;  // several blocks per thread
    auto g = randn(N, 44);
    const double s0 = cpu::sum_squares(g.data(), N);
    for (int rep = 0; rep < 200; ++rep) ASSERT_EQ(cpu::sum_squares(g.data(), N), s0) << "call " << rep;
    omp_set_num_threads(saved);
}

}  // namespace
}  // namespace llmt::kernels
