// The sliding window of the CPU attention ops (ops.h's `window`, Mistral's sliding_window): query t sees keys
// j with t - window < j <= t, forward, backward and the KV-cache path, against a float64 reference written
// here from that rule; alone and with packed examples (both bounds at once); on both CPU paths (the blocked
// GEMM path and the row-wise loops); and a window as long as the sequence is plain causal attention bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/knobs.h"
#include "kernels/ops.h"
#include "kernels/packed_positions.h"
#include "kernels/test_util.h"

namespace llmt::kernels {
namespace {

using test::pack_rows;
using test::randn;
using test::rel_err;

struct RefRun {
    std::vector<double> out, dqkv;
};

// softmax(q k^T / sqrt(HS)) v over keys max(t - pos[t], t - W + 1) .. t, and its gradient for `dout`, in double.
RefRun reference(const std::vector<float>& qkv, const std::vector<float>& dout, int B, int T, int NH, int KV, int HS,
              int W, const std::vector<int32_t>& pos) {
    const int C = NH * HS, C3 = C + 2 * KV * HS, rep = NH / KV;
    const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
    RefRun r{std::vector<double>(static_cast<size_t>(B) * T * C), std::vector<double>(qkv.size())};
    auto at = [&](int b, int t) { return (static_cast<size_t>(b) * T + t) * C3; };
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const int qo = h * HS, ko = C + (h / rep) * HS, vo = C + KV * HS + (h / rep) * HS;
            for (int t = 0; t < T; t++) {
                int lo = pos.empty() ? 0 : t - pos[static_cast<size_t>(b) * T + t];
                if (W > 0) lo = std::max(lo, t - W + 1);
                std::vector<double> p(static_cast<size_t>(t + 1), 0.0);
                double mx = -1e300, sum = 0;
                for (int j = lo; j <= t; j++) {
                    double s = 0;
                    for (int c = 0; c < HS; c++) s += double(qkv[at(b, t) + qo + c]) * qkv[at(b, j) + ko + c];
                    p[j] = s * scale;
                    mx = std::max(mx, p[j]);
                }
                for (int j = lo; j <= t; j++) sum += (p[j] = std::exp(p[j] - mx));
                for (int j = lo; j <= t; j++) p[j] /= sum;
                const float* dy = &dout[(static_cast<size_t>(b) * T + t) * C + qo];
                double D = 0;
                std::vector<double> dp(static_cast<size_t>(t + 1), 0.0);
                for (int j = lo; j <= t; j++) {
                    for (int c = 0; c < HS; c++) {
                        r.out[(static_cast<size_t>(b) * T + t) * C + qo + c] += p[j] * qkv[at(b, j) + vo + c];
                        dp[j] += double(dy[c]) * qkv[at(b, j) + vo + c];
                    }
                    D += p[j] * dp[j];
                }
                for (int j = lo; j <= t; j++) {
                    const double ds = p[j] * (dp[j] - D) * scale;
                    for (int c = 0; c < HS; c++) {
                        r.dqkv[at(b, j) + vo + c] += p[j] * dy[c];
                        r.dqkv[at(b, t) + qo + c] += ds * qkv[at(b, j) + ko + c];
                        r.dqkv[at(b, j) + ko + c] += ds * qkv[at(b, t) + qo + c];
                    }
                }
            }
        }
    return r;
}

struct Ours {
    std::vector<float> out, dqkv;
};

Ours ours(std::vector<float> qkv, std::vector<float> dout, int B, int T, int NH, int KV, int HS, int W,
          std::vector<int32_t> pos) {
    const int C = NH * HS, C3 = C + 2 * KV * HS;
    Ours o{std::vector<float>(static_cast<size_t>(B) * T * C), std::vector<float>(qkv.size())};
    std::vector<float> lse(static_cast<size_t>(B) * NH * T);
    const Tensor p = pos.empty() ? Tensor() : Tensor(pos.data(), {B, T}, DType::kI32);
    const Tensor q(qkv.data(), {B, T, C3}), out(o.out.data(), {B, T, C}), l(lse.data(), {B, NH, T});
    attention_forward(out, l, q, NH, KV, p, W);
    attention_backward(Tensor(o.dqkv.data(), {B, T, C3}), Tensor(dout.data(), {B, T, C}), q, out, l, NH, KV, {}, p, W);
    return o;
}

// fp32 against float64 over sums of <= 150 terms of O(1) values: ~1e-6 relative. A key outside the window let
// in (or one left out) moves a probability by >= 1 / window, so the outputs by O(1e-2).
constexpr double kTol = 2e-5;

TEST(SlidingWindowAttention, MatchesTheRuleForwardAndBackward) {
    for (const char* gemm : {"auto", "openblas"}) {  // blocked GEMM tiles, then the row-wise loops
        const ScopedKnob k(Knob::kGemm, gemm);
        const int B = 2, T = 150, NH = 4, KV = 2, HS = 8, C3 = (NH + 2 * KV) * HS;
        const auto qkv = randn(static_cast<size_t>(B) * T * C3, 31),
                   dout = randn(static_cast<size_t>(B) * T * NH * HS, 32);
        const auto packed = pack_rows({{70, 80}, {3, 100, 47}}, T).positions;
        for (int W : {1, 5, 64, 100})
            for (const auto& pos : {std::vector<int32_t>{}, packed}) {
                SCOPED_TRACE(std::string(gemm) + " window " + std::to_string(W) + (pos.empty() ? "" : " packed"));
                const RefRun want = reference(qkv, dout, B, T, NH, KV, HS, W, pos);
                const Ours got = ours(qkv, dout, B, T, NH, KV, HS, W, pos);
                EXPECT_LT(rel_err(got.out, want.out), kTol);
                EXPECT_LT(rel_err(got.dqkv, want.dqkv), kTol);
            }
        // A window covering the sequence hides nothing: plain causal attention, to the bit.
        const Ours full = ours(qkv, dout, B, T, NH, KV, HS, T, {}), plain = ours(qkv, dout, B, T, NH, KV, HS, 0, {});
        EXPECT_EQ(full.out, plain.out);
        EXPECT_EQ(full.dqkv, plain.dqkv);
    }
}

// The cached path (decoding) applies the same window: rows t0.. of the full forward.
TEST(SlidingWindowAttention, CachedRowsEqualTheFullForward) {
    const int T = 40, NH = 2, KV = 1, HS = 8, C = NH * HS, C3 = C + 2 * KV * HS, W = 7;
    auto qkv = randn(static_cast<size_t>(T) * C3, 41);
    std::vector<float> full(static_cast<size_t>(T) * C), lse(static_cast<size_t>(NH) * T);
    attention_forward(Tensor(full.data(), {1, T, C}), Tensor(lse.data(), {1, NH, T}), Tensor(qkv.data(), {1, T, C3}),
                      NH, KV, {}, W);
    for (int t0 : {0, 6, 25}) {
        const int Tq = T - t0;
        std::vector<float> rows(static_cast<size_t>(Tq) * C);
        attention_forward_cached(Tensor(rows.data(), {1, Tq, C}), Tensor(qkv.data(), {1, T, C3}), t0, NH, KV, W);
        const std::vector<float> want(full.begin() + static_cast<int64_t>(t0) * C, full.end());
        EXPECT_LT(rel_err(rows, want), 1e-6) << "t0 " << t0;
    }
}

}  // namespace
}  // namespace llmt::kernels
