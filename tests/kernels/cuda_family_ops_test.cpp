// The CUDA ops the Qwen3 and Mistral families add to the LLaMA graph, through kernels/ops.h (the dispatch the
// models use) against the CPU op on the same inputs: the per-head q/k RMSNorm (head_rmsnorm_forward/backward),
// fp32 and bf16; the sliding window of the attention (forward and backward: the fp32 kernels, the bf16 flash
// kernels at head sizes 64 and 128 and the bf16 fallback at 32; with packed examples too, both bounds at once);
// and the window of the KV-cache attention. Fresh random inputs each run (seed printed; replay with
// LLMT_TEST_SEED); outputs poisoned with NaN first, so an element a kernel forgets to write fails. Label gpu:
// skipped, saying so, without a CUDA device.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <utility>
#include <vector>

#include "core/bf16.h"
#include "kernels/attention_gpu_test_util.h"
#include "kernels/cuda/runtime.h"
#include "kernels/device_tensor.h"
#include "kernels/ops.h"
#include "kernels/packed_positions.h"

namespace llmt::kernels {
namespace {

using attn_test::compare;
using attn_test::Err;
using attn_test::expect_within;

// fp32 tolerances (max |gpu - cpu| / max |cpu|): both sides compute in fp32 and differ in summation order and
// libm vs CUDA sqrt/exp (a few ulp). Sums over a head (HS <= 256) or a window of keys: sqrt(n) * 6e-8 ~ 1e-6,
// so 2e-5 for forward outputs; a backward chains two or three such sums: 5e-5 (cuda_ops_test's bounds). A bf16
// or TF32 slip would show as ~1e-3.
constexpr double kTolFwd = 2e-5;
constexpr double kTolBwd = 5e-5;
// bf16 storage of an output the kernel computes in fp32 from the same (bf16-exact) inputs: one rounding to
// nearest, relative 2^-9 ~ 2e-3 of the element, so max |d| / max |ref| <= 2e-3; 4e-3 allowed.
constexpr double kTolBf16Store = 4e-3;
// The bf16 attention (flash_attention_test's bounds, reasoned there): P and dS rounded to bf16 before their
// tensor-core products, outputs stored in bf16: norm-relative 1e-2, max-relative 2e-2; lse from fp32 scores,
// 1e-4 absolute.
constexpr double kTolAttnNorm = 1e-2;
constexpr double kTolAttnMax = 2e-2;
constexpr double kTolLseAbs = 1e-4;
// A window of one key (or single-token examples): P = 1, so dS = P (dP - D) = 0 and dq, dk are exactly zero in
// exact arithmetic; both sides hold fp32 noise (~1e-6): judged absolutely.
constexpr double kTolZeroAbs = 1e-4;

uint32_t seed(uint32_t k) { return attn_test::base_seed("family-ops") * 7919u + k; }

// Normal(0, sigma) values; rounded to bf16 for dt = bf16 (so the CPU reference sees the GPU's inputs exactly).
std::vector<float> rnd(size_t n, uint32_t s, float sigma, DType dt, float mean = 0.0f) {
    std::mt19937 rng(s);
    std::normal_distribution<float> d(mean, sigma);
    std::vector<float> v(n);
    for (float& x : v) x = dt == DType::kBF16 ? float_from_bf16(bf16_from_float(d(rng))) : d(rng);
    return v;
}

// A tensor over data of the given shape (Tensor's own constructor takes an initializer list).
Tensor view(void* data, const std::vector<int64_t>& shape, DType dt, Device dev) {
    Tensor t;
    t.data = data;
    t.dtype = dt;
    t.device = dev;
    for (int64_t d : shape) t.shape[static_cast<size_t>(t.ndim++)] = d;
    return t;
}

using DevTensor = test::DeviceTensor;

Tensor host(std::vector<float>& v, const std::vector<int64_t>& shape) {
    return view(v.data(), shape, DType::kF32, Device::kCpu);
}

auto all = [](size_t) { return true; };

void expect_max_rel(const char* tag, const char* what, const Err& e, double tol) {
    std::printf("[family-ops] %s %-10s max rel %.2e (tol %.0e)\n", tag, what, e.max_rel, tol);
    EXPECT_TRUE(e.finite) << tag << " " << what << ": non-finite value (an element left unwritten?)";
    EXPECT_LE(e.max_rel, tol) << tag << " " << what;
}

class FamilyOps : public ::testing::Test {
protected:
    void SetUp() override {
        if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device (or built without CUDA): skipped";
    }
};

// ---- per-head q/k RMSNorm --------------------------------------------------------------------------------------

// One shape and dtype: forward (out, rstd) and backward (dinp out of place and in place over dout; the weight
// gradients accumulated onto non-zero values) against the CPU op on the same values.
void check_head_norm(DType dt, int B, int T, int NH, int KV, int HS, uint32_t k) {
    const char* tag = dt == DType::kBF16 ? "head_rmsnorm bf16" : "head_rmsnorm fp32";
    std::printf("[family-ops] %s B=%d T=%d NH=%d KV=%d HS=%d\n", tag, B, T, NH, KV, HS);
    const int64_t C3 = static_cast<int64_t>(NH + 2 * KV) * HS, rows = static_cast<int64_t>(B) * T;
    const size_t n = static_cast<size_t>(rows * C3);
    // eps 0.05 against mean squares ~0.25: a kernel that dropped or hard-coded eps would be ~10% off.
    const float eps = 0.05f;
    std::vector<float> inp = rnd(n, seed(k), 0.5f, dt), dout = rnd(n, seed(k + 1), 1.0f, dt);
    std::vector<float> qw = rnd(static_cast<size_t>(HS), seed(k + 2), 0.3f, dt, 1.0f);
    std::vector<float> kw = rnd(static_cast<size_t>(HS), seed(k + 3), 0.3f, dt, 1.0f);
    std::vector<float> dqw0 = rnd(static_cast<size_t>(HS), seed(k + 4), 1.0f, DType::kF32);
    std::vector<float> dkw0 = rnd(static_cast<size_t>(HS), seed(k + 5), 1.0f, DType::kF32);

    std::vector<float> out(n), rstd(static_cast<size_t>(rows * (NH + KV))), dinp(n), dqw = dqw0, dkw = dkw0;
    head_rmsnorm_forward(host(out, {B, T, C3}), host(rstd, {B, T, NH + KV}), host(inp, {B, T, C3}), host(qw, {HS}),
                         host(kw, {HS}), NH, KV, eps);
    head_rmsnorm_backward(host(dinp, {B, T, C3}), host(dqw, {HS}), host(dkw, {HS}), host(dout, {B, T, C3}),
                          host(inp, {B, T, C3}), host(qw, {HS}), host(kw, {HS}), host(rstd, {B, T, NH + KV}), NH, KV);

    DevTensor g_inp({B, T, C3}, dt), g_out({B, T, C3}, dt), g_rstd({B, T, NH + KV}, DType::kF32),
        g_qw({HS}, dt), g_kw({HS}, dt), g_dout({B, T, C3}, dt), g_dinp({B, T, C3}, dt), g_dqw({HS}, DType::kF32),
        g_dkw({HS}, DType::kF32);
    g_inp.upload(inp);
    g_qw.upload(qw);
    g_kw.upload(kw);
    g_dout.upload(dout);
    head_rmsnorm_forward(g_out.t(), g_rstd.t(), g_inp.t(), g_qw.t(), g_kw.t(), NH, KV, eps);
    const bool bf = dt == DType::kBF16;
    expect_max_rel(tag, "out", compare(g_out.download(), out, all), bf ? kTolBf16Store : kTolFwd);
    expect_max_rel(tag, "rstd", compare(g_rstd.download(), rstd, all), kTolFwd);

    for (bool in_place : {false, true}) {
        g_dqw.upload(dqw0);
        g_dkw.upload(dkw0);
        DevTensor& target = in_place ? g_dout : g_dinp;
        if (in_place) g_dout.upload(dout);
        head_rmsnorm_backward(target.t(), g_dqw.t(), g_dkw.t(), g_dout.t(), g_inp.t(), g_qw.t(), g_kw.t(),
                              g_rstd.t(), NH, KV);
        expect_max_rel(tag, in_place ? "dinp (in place)" : "dinp", compare(target.download(), dinp, all),
                       bf ? kTolBf16Store : kTolBwd);
        // fp32 sums of products of the same bf16-exact values on both sides: only the order differs.
        expect_max_rel(tag, "dq_weight", compare(g_dqw.download(), dqw, all), kTolBwd);
        expect_max_rel(tag, "dk_weight", compare(g_dkw.download(), dkw, all), kTolBwd);
    }
}

TEST_F(FamilyOps, HeadRmsnormMatchesCpu) {
    uint32_t k = 0;
    for (DType dt : {DType::kF32, DType::kBF16}) {
        check_head_norm(dt, 2, 7, 4, 2, 16, k += 10);    // one pair per lane, most lanes idle
        check_head_norm(dt, 1, 5, 2, 1, 80, k += 10);    // a head that is not a multiple of 64
        check_head_norm(dt, 3, 33, 4, 4, 128, k += 10);  // Qwen3's head size, multi-head
        check_head_norm(dt, 2, 3, 2, 1, 256, k += 10);   // the largest head
    }
}

// ---- the sliding window of the attention -------------------------------------------------------------------

struct AttnCase {
    DType dt;
    int B, T, NH, KV, HS, window;
    std::vector<std::vector<int>> lengths;  // packed rows (B = its size), or empty
    bool colsum = false;                    // also the fused column sums of dqkv (the qkv bias gradient)
};

// Forward (out, lse) and backward (dq, dk, dv apart) against the CPU op with the same window (and positions).
void check_window(const AttnCase& c, uint32_t k) {
    int B = c.B;
    std::vector<int32_t> pos;
    bool single = c.window == 1;  // every query sees only itself
    if (!c.lengths.empty()) {
        const test::Packing pk = test::pack_rows(c.lengths, c.T);
        B = pk.B;
        pos = pk.positions;
        bool ones = true;
        for (const auto& s : pk.spans) ones = ones && s.len == 1;
        single = single || ones;
    }
    const bool bf = c.dt == DType::kBF16;
    char tag[160];
    std::snprintf(tag, sizeof tag, "attention %s B=%d T=%d NH=%d KV=%d HS=%d window=%d%s%s", bf ? "bf16" : "fp32", B,
                  c.T, c.NH, c.KV, c.HS, c.window, pos.empty() ? "" : " packed", c.colsum ? " colsum" : "");
    const int T = c.T, NH = c.NH, KV = c.KV, C = NH * c.HS;
    const int64_t C3 = C + 2 * static_cast<int64_t>(KV) * c.HS;
    const size_t n_qkv = static_cast<size_t>(B) * T * C3, n_out = static_cast<size_t>(B) * T * C;
    std::vector<float> qkv = rnd(n_qkv, seed(k), 1.0f, c.dt), dout = rnd(n_out, seed(k + 1), 1.0f, c.dt);
    std::vector<float> out(n_out), lse(static_cast<size_t>(B) * NH * T), dqkv(n_qkv),
        col(static_cast<size_t>(C3), 0.f);
    Tensor pos_h = pos.empty() ? Tensor() : Tensor(pos.data(), {B, T}, DType::kI32);
    attention_forward(host(out, {B, T, C}), host(lse, {B, NH, T}), host(qkv, {B, T, C3}), NH, KV, pos_h, c.window);
    attention_backward(host(dqkv, {B, T, C3}), host(dout, {B, T, C}), host(qkv, {B, T, C3}), host(out, {B, T, C}),
                       host(lse, {B, NH, T}), NH, KV, c.colsum ? host(col, {C3}) : Tensor(), pos_h, c.window);

    DevTensor g_qkv({B, T, C3}, c.dt), g_out({B, T, C}, c.dt), g_lse({B, NH, T}, DType::kF32),
        g_dout({B, T, C}, c.dt), g_dqkv({B, T, C3}, c.dt), g_pos({B, T}, DType::kI32), g_col({C3}, DType::kF32);
    g_qkv.upload(qkv);
    g_dout.upload(dout);
    g_col.upload(std::vector<float>(static_cast<size_t>(C3), 0.f));
    if (!pos.empty()) g_pos.upload_ids(pos);
    const Tensor pos_g = pos.empty() ? Tensor() : g_pos.t();
    attention_forward(g_out.t(), g_lse.t(), g_qkv.t(), NH, KV, pos_g, c.window);
    attention_backward(g_dqkv.t(), g_dout.t(), g_qkv.t(), g_out.t(), g_lse.t(), NH, KV,
                       c.colsum ? g_col.t() : Tensor(), pos_g, c.window);

    const std::vector<float> out_g = g_out.download(), lse_g = g_lse.download(), dqkv_g = g_dqkv.download();
    auto judge = [&](const char* what, const Err& e, double fp32_tol) {
        if (!bf) return expect_max_rel(tag, what, e, fp32_tol);
        expect_within(fmt::format("[family-ops] {} {:<4}", tag, what), e, kTolAttnNorm, kTolAttnMax);
    };
    judge("out", compare(out_g, out, all), kTolFwd);
    const Err el = compare(lse_g, lse, all);
    std::printf("[family-ops] %s lse  max abs %.2e (tol %.0e)\n", tag, el.max_abs, bf ? kTolLseAbs : kTolFwd);
    EXPECT_TRUE(el.finite) << tag << " lse";
    EXPECT_LE(el.max_abs, bf ? kTolLseAbs : kTolFwd) << tag << " lse";  // lse ~ log(window) + O(1) here
    const size_t kvw = static_cast<size_t>(KV) * c.HS;
    auto part_of = [&](size_t i) {
        const size_t ch = i % static_cast<size_t>(C3);
        return ch < static_cast<size_t>(C) ? 0u : ch < C + kvw ? 1u : 2u;
    };
    const char* names[3] = {"dq", "dk", "dv"};
    for (unsigned part = 0; part < 3; part++) {
        const Err e = compare(dqkv_g, dqkv, [&](size_t i) { return part_of(i) == part; });
        if (single && part < 2) {
            std::printf("[family-ops] %s %-4s max abs %.2e (exactly 0 in exact arithmetic)\n", tag, names[part],
                        e.max_abs);
            EXPECT_TRUE(e.finite) << tag << " " << names[part];
            EXPECT_LE(e.max_abs, kTolZeroAbs) << tag << " " << names[part];
        } else {
            judge(names[part], e, kTolBwd);
        }
    }
    if (c.colsum) {
        // Column sums over B*T rows of the fp32 values (before the bf16 rounding of dqkv on the GPU).
        const Err e = compare(g_col.download(), col, all);
        std::printf("[family-ops] %s colsum norm rel %.2e (tol %.0e)\n", tag, e.norm_rel, kTolAttnNorm);
        EXPECT_TRUE(e.finite);
        EXPECT_LE(e.norm_rel, kTolAttnNorm) << tag << " colsum";
    }
}

// fp32: the CUDA-core kernels (one warp per row), multi-head and grouped-query, windows from one key to T - 1.
TEST_F(FamilyOps, WindowedAttentionFp32MatchesCpu) {
    uint32_t k = 100;
    for (int w : {1, 7, 32, 69}) {
        check_window({DType::kF32, 2, 70, 4, 2, 32, w, {}}, k += 2);
        check_window({DType::kF32, 1, 45, 2, 2, 64, w, {}}, k += 2);
    }
    // Both bounds at once: packed examples shorter and longer than the window.
    check_window({DType::kF32, 0, 70, 4, 2, 32, 9, {{3, 30, 37}, {70}}}, k += 2);
    check_window({DType::kF32, 0, 64, 4, 4, 16, 5, {{1, 1, 62}}}, k += 2);
}

// bf16: the tensor-core flash kernels (head sizes 64 and 128: forward 64-key tiles, backward 128-key blocks and
// 64- or 32-query tiles), so windows below, at and above a tile, and T not a multiple of one; multi-head, grouped
// (2 query heads per kv head) and multi-query (all on one); and the bf16 fallback kernels at head size 32.
TEST_F(FamilyOps, WindowedAttentionBf16MatchesCpu) {
    uint32_t k = 200;
    for (int hs : {64, 128})
        for (int w : {1, 17, 64, 100, 257}) {
            check_window({DType::kBF16, 2, 300, 4, 2, hs, w, {}}, k += 2);
            check_window({DType::kBF16, 1, 129, 4, 4, hs, w, {}}, k += 2);
        }
    check_window({DType::kBF16, 1, 300, 8, 1, 64, 40, {}}, k += 2);
    check_window({DType::kBF16, 2, 200, 4, 2, 32, 23, {}}, k += 2);  // the simple bf16 kernels
    check_window({DType::kBF16, 0, 300, 4, 2, 64, 50, {{10, 150, 140}, {300}}}, k += 2);
    check_window({DType::kBF16, 0, 256, 4, 4, 128, 70, {{100, 1, 155}}}, k += 2);
    check_window({DType::kBF16, 2, 190, 4, 2, 64, 33, {}, true}, k += 2);  // with the fused column sums
}

// The KV-cache attention (fp32, what the decoder runs): query rows t0..t0+Tq-1 of a filled cache, against the
// CPU op with the same window, from the prefill (t0 = 0) to single steps late in the cache.
TEST_F(FamilyOps, WindowedCachedAttentionMatchesCpu) {
    const int B = 2, Tmax = 90, NH = 4, KV = 2, HS = 64, C = NH * HS, C3 = C + 2 * KV * HS;
    const std::vector<float> qkv0 = rnd(static_cast<size_t>(B) * Tmax * C3, seed(300), 1.0f, DType::kF32);
    DevTensor g_qkv({B, Tmax, C3}, DType::kF32);
    g_qkv.upload(qkv0);
    for (int w : {1, 6, 16, 0})
        for (auto [t0, Tq] : std::vector<std::pair<int, int>>{{0, Tmax}, {0, 5}, {13, 1}, {40, 7}, {Tmax - 1, 1}}) {
            std::vector<float> qkv = qkv0, out(static_cast<size_t>(B) * Tq * C);
            attention_forward_cached(host(out, {B, Tq, C}), host(qkv, {B, Tmax, C3}), t0, NH, KV, w);
            DevTensor g_out({B, Tq, C}, DType::kF32);
            attention_forward_cached(g_out.t(), g_qkv.t(), t0, NH, KV, w);
            char tag[96];
            std::snprintf(tag, sizeof tag, "cached attention window=%d t0=%d Tq=%d", w, t0, Tq);
            expect_max_rel(tag, "out", compare(g_out.download(), out, all), kTolFwd);
        }
}

}  // namespace
}  // namespace llmt::kernels
