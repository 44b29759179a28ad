// Finite-difference checks, in fp64, of every backward formula (tests/kernels/ref_ops.h), GPT-2's and LLaMA's
// (RMSNorm, SwiGLU, RoPE, grouped-query attention). Together with
// kernels_test.cpp (fp32 kernels == these references) this checks each kernel's backward.
// Tolerance 1e-6 relative: central differences with h = 1e-6 in fp64 have truncation error ~h^2 and
// rounding error ~1e-16 |L| / h ~ 1e-9 at these sizes, while a wrong formula is off by O(1).
#include <gtest/gtest.h>

#include "ref_ops.h"
#include "test_util.h"

namespace llmt::kernels {
namespace {

using test::cast;
using test::dot;
using test::fd_check;
using test::randn;
constexpr double kTol = 1e-6;

TEST(GradCheck, LayerNorm) {
    const int N = 3, C = 7;
    auto x = cast<double>(randn(N * C, 1));
    auto w = cast<double>(randn(C, 2));
    auto b = cast<double>(randn(C, 3));
    auto R = cast<double>(randn(N * C, 4));
    std::vector<double> out(N * C), mean(N), rstd(N), dx(N * C), dw(C), db(C);
    auto loss = [&] {
        ref::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
        return dot(out, R);
    };
    ref::layernorm_backward(dx.data(), dw.data(), db.data(), R.data(), x.data(), w.data(), N, C);
    EXPECT_LT(fd_check(x, dx, loss), kTol);
    EXPECT_LT(fd_check(w, dw, loss), kTol);
    EXPECT_LT(fd_check(b, db, loss), kTol);
}

TEST(GradCheck, Matmul) {
    const int N = 4, C = 5, OC = 3;
    auto x = cast<double>(randn(N * C, 5));
    auto w = cast<double>(randn(OC * C, 6));
    auto b = cast<double>(randn(OC, 7));
    auto R = cast<double>(randn(N * OC, 8));
    std::vector<double> out(N * OC), dx(N * C), dw(OC * C), db(OC);
    auto loss = [&] {
        ref::matmul_forward(out.data(), x.data(), w.data(), b.data(), N, C, OC);
        return dot(out, R);
    };
    ref::matmul_backward(dx.data(), dw.data(), db.data(), R.data(), x.data(), w.data(), N, C, OC);
    EXPECT_LT(fd_check(x, dx, loss), kTol);
    EXPECT_LT(fd_check(w, dw, loss), kTol);
    EXPECT_LT(fd_check(b, db, loss), kTol);
}

TEST(GradCheck, Attention) {
    const int B = 2, T = 5, C = 6, NH = 2;
    auto qkv = cast<double>(randn(B * T * 3 * C, 9));
    auto R = cast<double>(randn(B * T * C, 10));
    std::vector<double> out(B * T * C), dqkv(B * T * 3 * C), att;
    auto loss = [&] {
        ref::attention_forward(out.data(), att, qkv.data(), B, T, C, NH);
        return dot(out, R);
    };
    loss();
    ref::attention_backward(dqkv.data(), R.data(), qkv.data(), att, B, T, C, NH);
    EXPECT_LT(fd_check(qkv, dqkv, loss), kTol);
}

// Grouped-query attention: NH = 4 query heads on KV = 2 and KV = 1 (multi-query) key/value heads; dk and dv
// collect the terms of every query head that reads them.
TEST(GradCheck, AttentionGroupedQuery) {
    for (const int KV : {2, 1}) {
        SCOPED_TRACE(KV);
        const int B = 2, T = 5, NH = 4, HS = 3, C = NH * HS, C3 = C + 2 * KV * HS;
        auto qkv = cast<double>(randn(B * T * C3, 30 + KV));
        auto R = cast<double>(randn(B * T * C, 40 + KV));
        std::vector<double> out(B * T * C), dqkv(B * T * C3), att;
        auto loss = [&] {
            ref::attention_forward(out.data(), att, qkv.data(), B, T, C, NH, KV);
            return dot(out, R);
        };
        loss();
        ref::attention_backward(dqkv.data(), R.data(), qkv.data(), att, B, T, C, NH, KV);
        EXPECT_LT(fd_check(qkv, dqkv, loss), kTol);
    }
}

TEST(GradCheck, RmsNorm) {
    const int N = 3, C = 7;
    const double eps = 0.1;  // large enough to matter in the derivative
    auto x = cast<double>(randn(N * C, 50));
    auto w = cast<double>(randn(C, 51));
    auto R = cast<double>(randn(N * C, 52));
    std::vector<double> out(N * C), rstd(N), dx(N * C), dw(C);
    auto loss = [&] {
        ref::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), eps, N, C);
        return dot(out, R);
    };
    ref::rmsnorm_backward(dx.data(), dw.data(), R.data(), x.data(), w.data(), eps, N, C);
    EXPECT_LT(fd_check(x, dx, loss), kTol);
    EXPECT_LT(fd_check(w, dw, loss), kTol);
}

TEST(GradCheck, SwiGlu) {
    const int N = 3, F = 5;
    auto x = cast<double>(randn(N * 2 * F, 53, 2.0f));
    auto R = cast<double>(randn(N * F, 54));
    std::vector<double> out(N * F), dx(N * 2 * F);
    auto loss = [&] {
        ref::swiglu_forward(out.data(), x.data(), N, F);
        return dot(out, R);
    };
    ref::swiglu_backward(dx.data(), R.data(), x.data(), N, F);
    EXPECT_LT(fd_check(x, dx, loss), kTol);
}

// RoPE is linear in qkv, so its gradient is the transpose of the rotation; v's channels pass through.
TEST(GradCheck, Rope) {
    const int B = 2, T = 3, NH = 2, KV = 1, HS = 6, C3 = (NH + 2 * KV) * HS;
    const auto table = cast<double>(ref::rope_table(T, HS));
    auto x = cast<double>(randn(B * T * C3, 55));
    auto R = cast<double>(randn(B * T * C3, 56));
    std::vector<double> y(x.size());
    auto loss = [&] {
        y = x;
        ref::rope_forward(y.data(), table.data(), B, T, NH, KV, HS, 0);
        return dot(y, R);
    };
    auto dx = R;
    ref::rope_backward(dx.data(), table.data(), B, T, NH, KV, HS);
    EXPECT_LT(fd_check(x, dx, loss), kTol);
}

TEST(GradCheck, Gelu) {
    auto x = cast<double>(randn(50, 11, 2.0f));
    std::vector<double> g(x.size());
    for (size_t i = 0; i < x.size(); i++) g[i] = ref::gelu_grad(x[i]);
    // d/dx_i of sum_j gelu(x_j) is gelu'(x_i).
    auto loss = [&] {
        double s = 0;
        for (double v : x) s += ref::gelu(v);
        return s;
    };
    EXPECT_LT(fd_check(x, g, loss), kTol);
}

TEST(GradCheck, Classifier) {
    const int N = 4, V = 9, Vp = 12;
    auto logits = cast<double>(randn(N * Vp, 12, 3.0f));
    std::vector<int32_t> y = {0, 8, -1, 4};  // includes the last real class and an ignored row
    std::vector<double> losses(N), dlogits(N * Vp);
    const double scale = 0.25;
    auto loss = [&] {
        ref::classifier<double>(losses.data(), nullptr, logits.data(), y.data(), scale, N, V, Vp);
        double s = 0;
        for (double l : losses) s += l * scale;
        return s;
    };
    ref::classifier<double>(losses.data(), dlogits.data(), logits.data(), y.data(), scale, N, V, Vp);
    EXPECT_LT(fd_check(logits, dlogits, loss), kTol);
    for (int r = 0; r < N; r++)
        for (int i = V; i < Vp; i++) EXPECT_EQ(dlogits[r * Vp + i], 0.0);
}

TEST(GradCheck, Encoder) {
    const int B = 2, T = 3, C = 4, V = 5;
    auto wte = cast<double>(randn(V * C, 13));
    auto wpe = cast<double>(randn(T * C, 14));
    std::vector<int32_t> inp = {1, 1, 4, 0, 1, 3};  // a repeated id exercises the scatter-add
    auto R = cast<double>(randn(B * T * C, 15));
    std::vector<double> out(B * T * C), dwte(V * C, 0.0), dwpe(T * C, 0.0);
    auto loss = [&] {
        ref::encoder_forward(out.data(), inp.data(), wte.data(), wpe.data(), B, T, C);
        return dot(out, R);
    };
    ref::encoder_backward(dwte.data(), dwpe.data(), R.data(), inp.data(), B, T, C);
    EXPECT_LT(fd_check(wte, dwte, loss), kTol);
    EXPECT_LT(fd_check(wpe, dwpe, loss), kTol);
}

}  // namespace
}  // namespace llmt::kernels
