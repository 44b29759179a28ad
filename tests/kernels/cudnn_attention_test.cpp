// cuDNN's fused attention (kernels/cuda/cudnn_attention.h) against the fp32 CPU op (kernels/cpu/attention.h)
// on the same bf16-rounded inputs and against our flash attention (kernels/cuda/flash_attention.h): out,
// lse and dqkv, plus the two mixed pairs (cuDNN forward + flash backward, flash forward + cuDNN backward)
// that prove the lse layouts interchangeable. Fresh random inputs (seed printed; replay with LLMT_TEST_SEED).
// Label gpu: skips, saying why, without a CUDA device or without a loadable cuDNN 9. Outputs start as NaN.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/attention_gpu_test_util.h"
#include "kernels/cpu/attention.h"
#include "kernels/cuda/cudnn_attention.h"
#include "kernels/cuda/flash_attention.h"
#include "kernels/cuda/runtime.h"

namespace llmt::kernels {
namespace {

using attn_test::compare;
using attn_test::DevBuf;
using attn_test::Err;
using attn_test::expect_within;
using attn_test::random_bf16;
using attn_test::widen;

// Tolerances, as in flash_attention_test.cpp. Both sides see identical bf16 inputs; the GPU rounds P and
// dS to bf16 before its tensor-core products and stores out/dq/dk/dv in bf16 (2^-9 = 2e-3 relative each,
// random signs), so the error against the fp32 CPU op is a few 1e-3 in norm:
//  - vs CPU: norm-relative <= 1e-2 (the issue's ~1e-2 for bf16); max |d| / max |ref| <= 2e-2 (one element
//    can collect several same-sign roundings).
//  - cuDNN vs flash: two independent sets of such roundings, so the max bound doubles (norm stays 1e-2).
//  - lse: fp32 scores (bf16 x bf16 products are exact in fp32) with fp32 sums give ~1e-6 * |lse|; cuDNN's
//    own exp/log approximations are not documented, so 1e-3 absolute: still 10x under what one bf16
//    rounding of the scores (~1e-2) would show, and an lse error d scales every gradient by only (1 - d).
constexpr double kTolNorm = 1e-2;
constexpr double kTolMax = 2e-2;
constexpr double kTolMaxGpuPair = 4e-2;
constexpr double kTolLseAbs = 1e-3;

uint32_t base_seed() { return attn_test::base_seed("cudnn-attn"); }

void expect_close(const char* what, const char* vs, const Err& e, double tol_max, int T, int hs) {
    expect_within(fmt::format("[cudnn-attn] T={:<5} hs={:<3} {:<12} vs {:<5}", T, hs, what, vs), e, kTolNorm, tol_max);
}

// dq, dk and dv of got vs ref, each on its own scale. qkv rows: q [0, C), k [C, C + KVW), v [C + KVW, C + 2 KVW).
void expect_dqkv(const char* who, const char* vs, const std::vector<float>& got, const std::vector<float>& ref, int C,
                 int KVW, double tol_max, int T, int hs) {
    const size_t C3 = static_cast<size_t>(C) + 2 * static_cast<size_t>(KVW);
    const char* names[3] = {"dq", "dk", "dv"};
    auto part_of = [&](size_t i) {
        const size_t c = i % C3;
        return c < static_cast<size_t>(C) ? 0u : c < static_cast<size_t>(C + KVW) ? 1u : 2u;
    };
    for (size_t part = 0; part < 3; part++) {
        const std::string what = std::string(who) + " " + names[part];
        expect_close(what.c_str(), vs, compare(got, ref, [&](size_t i) { return part_of(i) == part; }), tol_max, T,
                     hs);
    }
}

class CudnnAttention : public ::testing::Test {
protected:
    void SetUp() override {
        if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device: cuDNN attention GPU test skipped";
        const size_t v = cuda::cudnn_attention_library_version();
        if (v == 0) GTEST_SKIP() << "libcudnn.so.9 not loadable (see the stderr line): cuDNN attention test skipped";
        static bool said = false;
        if (!said) std::printf("[cudnn-attn] cuDNN %zu\n", v);
        said = true;
    }

    // KV < NH: grouped-query attention (0: KV = NH).
    static void check(int B, int T, int NH, int hs, float sigma, uint32_t k, int KV = 0) {
        if (KV == 0) KV = NH;
        const int C = NH * hs, KVW = KV * hs;
        const size_t n_qkv = static_cast<size_t>(B) * T * (C + 2 * KVW), n_out = static_cast<size_t>(B) * T * C,
                     n_lse = static_cast<size_t>(B) * NH * T;
        std::vector<uint16_t> qkv_h, dout_h;
        std::vector<float> qkv_f, dout_f;
        random_bf16(n_qkv, base_seed() * 7919u + 2 * k, sigma, qkv_h, qkv_f);
        random_bf16(n_out, base_seed() * 7919u + 2 * k + 1, 1.0f, dout_h, dout_f);

        std::vector<float> out_ref(n_out), lse_ref(n_lse), dqkv_ref(n_qkv);
        cpu::attention_forward(out_ref.data(), lse_ref.data(), qkv_f.data(), B, T, C, NH, KV);
        cpu::attention_backward(dqkv_ref.data(), dout_f.data(), qkv_f.data(), out_ref.data(), lse_ref.data(), B, T, C,
                                NH, KV);

        DevBuf<uint16_t> qkv(n_qkv), dout(n_out), out_c(n_out), out_f(n_out), dqkv_c(n_qkv), dqkv_f(n_qkv),
            dqkv_x(n_qkv);
        DevBuf<float> lse_c(n_lse), lse_f(n_lse);
        qkv.upload(qkv_h);
        dout.upload(dout_h);
        cudaStream_t s = cuda::stream();

        // cuDNN end to end, and our flash kernels end to end.
        ASSERT_TRUE(cuda::cudnn_attention_forward(out_c.bf(), lse_c.get(), qkv.bf(), B, T, C, NH, KV, s))
            << "cuDNN refused the forward for B=" << B << " T=" << T << " NH=" << NH << " KV=" << KV << " hs=" << hs;
        ASSERT_TRUE(cuda::cudnn_attention_backward(dqkv_c.bf(), dout.bf(), qkv.bf(), out_c.bf(), lse_c.get(), B, T, C,
                                                   NH, KV, s))
            << "cuDNN refused the backward";
        cuda::flash_attention_forward(out_f.bf(), lse_f.get(), qkv.bf(), B, T, C, NH, KV, s);
        cuda::flash_attention_backward(dqkv_f.bf(), dout.bf(), qkv.bf(), out_f.bf(), lse_f.get(), B, T, C, NH, KV, s);
        cuda::synchronize();
        const auto out_cw = widen(out_c.download()), out_fw = widen(out_f.download());
        const auto lse_cg = lse_c.download(), lse_fg = lse_f.download();
        const auto dqkv_cw = widen(dqkv_c.download()), dqkv_fw = widen(dqkv_f.download());

        auto all = [](size_t) { return true; };
        expect_close("cudnn out", "cpu", compare(out_cw, out_ref, all), kTolMax, T, hs);
        expect_close("cudnn out", "flash", compare(out_cw, out_fw, all), kTolMaxGpuPair, T, hs);
        const Err le = compare(lse_cg, lse_ref, all), lf = compare(lse_cg, lse_fg, all);
        std::printf("[cudnn-attn] T=%-5d hs=%-3d cudnn lse    max abs vs cpu %.2e, vs flash %.2e (tol %.0e)\n", T, hs,
                    le.max_abs, lf.max_abs, kTolLseAbs);
        EXPECT_TRUE(le.finite) << "lse: non-finite value";
        EXPECT_LE(le.max_abs, kTolLseAbs) << "cuDNN lse vs CPU";
        EXPECT_LE(lf.max_abs, kTolLseAbs) << "cuDNN lse vs flash";
        expect_dqkv("cudnn", "cpu", dqkv_cw, dqkv_ref, C, KVW, kTolMax, T, hs);
        expect_dqkv("cudnn", "flash", dqkv_cw, dqkv_fw, C, KVW, kTolMaxGpuPair, T, hs);

        // Mixed pairs: each backward consumes the other forward's out and lse. The cuDNN one also reruns the
        // backward plan on a workspace whose fp32 dQ accumulator holds the first call's sums, so a stale
        // accumulator (cuDNN >= 9.6 zeroes it itself; we zero it before) would show as a doubled dq here.
        ASSERT_TRUE(cuda::cudnn_attention_backward(dqkv_x.bf(), dout.bf(), qkv.bf(), out_f.bf(), lse_f.get(), B, T, C,
                                                   NH, KV, s));
        cuda::synchronize();
        expect_dqkv("flash>cudnn", "cpu", widen(dqkv_x.download()), dqkv_ref, C, KVW, kTolMax, T, hs);
        dqkv_x.poison();
        cuda::flash_attention_backward(dqkv_x.bf(), dout.bf(), qkv.bf(), out_c.bf(), lse_c.get(), B, T, C, NH, KV, s);
        cuda::synchronize();
        expect_dqkv("cudnn>flash", "cpu", widen(dqkv_x.download()), dqkv_ref, C, KVW, kTolMax, T, hs);

        // Rerun the forward through the cached plan into poisoned buffers: the same bits (no atomics there).
        out_c.poison();
        lse_c.poison();
        ASSERT_TRUE(cuda::cudnn_attention_forward(out_c.bf(), lse_c.get(), qkv.bf(), B, T, C, NH, KV, s));
        cuda::synchronize();
        EXPECT_EQ(widen(out_c.download()), out_cw) << "forward output changed between identical runs";
        EXPECT_EQ(lse_c.download(), lse_cg) << "lse changed between identical runs";
    }
};

TEST_F(CudnnAttention, TileMultipleHs64) { check(2, 128, 2, 64, 1.0f, 1); }
TEST_F(CudnnAttention, RaggedHs64) { check(1, 200, 3, 64, 1.0f, 2); }
TEST_F(CudnnAttention, RaggedShortHs64) { check(3, 65, 1, 64, 1.0f, 3); }
// GPT-2 124M's attention for one sequence: T=1024, 12 heads of 64.
TEST_F(CudnnAttention, Gpt2Shape) { check(1, 1024, 12, 64, 1.0f, 4); }
// Wider scores (sigma 2 on q and k: logits ~ N(0, 16)) make the softmax peaky, so the running max matters.
TEST_F(CudnnAttention, Gpt2LengthPeakyHs64) { check(2, 1024, 2, 64, 2.0f, 5); }
TEST_F(CudnnAttention, RaggedHs128) { check(2, 77, 2, 128, 1.0f, 6); }
TEST_F(CudnnAttention, LongRaggedHs128) { check(1, 300, 2, 128, 1.5f, 7); }
// Grouped-query attention (K/V with fewer heads, dK/dV reduced over each kv head's query heads): Llama-3.2-1B's
// attention for one sequence (32 query heads on 8 kv heads of 64, T 2048), ragged 6/2, multi-query at hs 128.
TEST_F(CudnnAttention, Llama1BShapeGqa) { check(1, 2048, 32, 64, 1.0f, 8, 8); }
TEST_F(CudnnAttention, GqaRaggedHs64) { check(2, 200, 6, 64, 1.0f, 9, 2); }
TEST_F(CudnnAttention, MqaRaggedHs128) { check(2, 77, 4, 128, 1.0f, 10, 1); }

// One token: cuDNN may run it or refuse it; either way the contract holds: true means the right answer,
// false means nothing was written (the caller falls back).
TEST_F(CudnnAttention, SingleTokenRunsOrRefusesCleanly) {
    const int B = 2, T = 1, NH = 2, hs = 64, C = NH * hs;
    std::vector<uint16_t> qkv_h;
    std::vector<float> qkv_f;
    random_bf16(static_cast<size_t>(B) * T * 3 * C, base_seed() * 7919u + 99, 1.0f, qkv_h, qkv_f);
    DevBuf<uint16_t> qkv(qkv_h.size()), out(static_cast<size_t>(B) * T * C);
    DevBuf<float> lse(static_cast<size_t>(B) * NH * T);
    qkv.upload(qkv_h);
    const bool ran = cuda::cudnn_attention_forward(out.bf(), lse.get(), qkv.bf(), B, T, C, NH, NH, cuda::stream());
    cuda::synchronize();
    const auto got = widen(out.download());
    std::printf("[cudnn-attn] T=1 forward %s\n", ran ? "ran" : "refused");
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) {
            const float g = got[static_cast<size_t>(b) * C + c];
            if (ran) {
                // softmax over one key is 1, so out = v exactly (bf16 v, rounded once more to bf16: exact).
                EXPECT_EQ(g, qkv_f[static_cast<size_t>(b) * 3 * C + 2 * C + c]) << "b=" << b << " c=" << c;
            } else {
                EXPECT_TRUE(std::isnan(g)) << "refused, yet out was written at b=" << b << " c=" << c;
            }
        }
}

// Validation happens before cuDNN or the device is touched, so this runs (and must return false) anywhere.
TEST(CudnnAttentionArgs, RefusesUnsupportedShapes) {
    EXPECT_FALSE(cuda::cudnn_attention_forward(nullptr, nullptr, nullptr, 1, 16, 300, 3, 3, nullptr));  // hs 100
    EXPECT_FALSE(cuda::cudnn_attention_forward(nullptr, nullptr, nullptr, 1, 16, 512, 2, 2, nullptr));  // hs 256
    EXPECT_FALSE(
        cuda::cudnn_attention_backward(nullptr, nullptr, nullptr, nullptr, nullptr, 1, 16, 100, 3, 3, nullptr));
    EXPECT_FALSE(
        cuda::cudnn_attention_backward(nullptr, nullptr, nullptr, nullptr, nullptr, 0, 16, 128, 2, 2, nullptr));
    EXPECT_FALSE(cuda::cudnn_attention_forward(nullptr, nullptr, nullptr, 1, 16, 192, 3, 2, nullptr));  // 3 on 2
}

}  // namespace
}  // namespace llmt::kernels
