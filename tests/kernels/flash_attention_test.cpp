// The bf16 tensor-core flash attention (kernels/cuda/flash_attention.h) against the fp32 CPU op
// (kernels/cpu/attention.h) run on the same bf16-rounded inputs: out, lse and dqkv, on fresh random inputs
// (seed printed; replay with LLMT_TEST_SEED), for hs 64 and 128 and T that is and is not a multiple of the
// 64-row tiles, and grouped-query attention (KV < NH kv heads), and packed examples (positions restarting at 0
// per example: the CPU op with the same positions is the reference). Label gpu: skipped, saying so, without a
// CUDA device. Outputs are poisoned with NaN first.
// Built twice: flash_attention_test runs src's kernels; flash_attention_lab_test (LLMT_FLASH_LAB) runs the
// kernel lab's (bench/kernels/flash_attention_lab.h), whose tile shape the LLMT_FLASH_* variables pick.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/error.h"
#include "kernels/attention_gpu_test_util.h"
#include "kernels/cpu/attention.h"
#include "kernels/cuda/flash_attention.h"
#include "kernels/cuda/runtime.h"
#include "kernels/packed_positions.h"
#if LLMT_FLASH_LAB
#include "flash_attention_lab.h"
#endif

namespace llmt::kernels {
namespace {

using attn_test::compare;
using attn_test::DevBuf;
using attn_test::Err;
using attn_test::expect_within;
using attn_test::random_bf16;
using attn_test::widen;

// Tolerances. Inputs are identical bf16 values on both sides and every GPU product and sum is fp32, so
// the differences come from bf16 roundings the fp32 reference does not make: P and dS are rounded to bf16
// (relative 2^-9 = 2e-3 each) before their tensor-core products, and out / dq / dk / dv are stored in bf16
// (another 2e-3 each). These errors have random signs, so ||gpu - ref|| / ||ref|| stays a few 1e-3:
//  - out, dq, dk, dv: norm-relative error <= 1e-2 (the issue's ~1e-2 for bf16), and
//    max |gpu - ref| / max |ref| <= 2e-2 (one element can collect several same-sign roundings).
//  - lse: computed from exact fp32 scores (bf16 x bf16 products are exact in fp32) with fp32 sums, the
//    exp2 approximation (2 ulp) and one scale rounding: |error| ~ 1e-6 * |lse| <= 1e-5 here, so 1e-4
//    absolute; a bf16 rounding anywhere on that path would show as ~1e-2 and fail it.
constexpr double kTolNorm = 1e-2;
constexpr double kTolMax = 2e-2;
constexpr double kTolLseAbs = 1e-4;

#if LLMT_FLASH_LAB
using lab::flash_attention_backward;
using lab::flash_attention_forward;
#else
using cuda::flash_attention_backward;
using cuda::flash_attention_forward;
#endif

uint32_t base_seed() { return attn_test::base_seed("flash-attn"); }

void expect_rel(const char* what, const Err& e, int T, int hs) {
    expect_within(fmt::format("[flash-attn] T={:<5} hs={:<3} {:<4}", T, hs, what), e, kTolNorm, kTolMax);
}

class FlashAttention : public ::testing::Test {
protected:
    void SetUp() override {
        if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device: flash attention GPU test skipped";
    }

    // One shape: forward and backward on the GPU vs the CPU op, plus a rerun that must reproduce out, lse and,
    // for multi-head attention, dk and dv bit for bit (a race would move them; dq is summed with atomics in any
    // order, and so are dk/dv of grouped-query heads when a kv head's query heads are split over blocks).
    // KV < NH: grouped-query attention (0: KV = NH). lengths (optional): packed rows, the example lengths of
    // each (B = lengths.size(), each row adding up to T).
    static void check(int B, int T, int NH, int hs, float sigma, uint32_t k, int KV = 0,
                      const std::vector<std::vector<int>>& lengths = {}) {
        if (KV == 0) KV = NH;
        std::vector<int32_t> pos_h;
        bool single_tokens = T == 1;  // every query sees only itself
        if (!lengths.empty()) {
            const test::Packing pk = test::pack_rows(lengths, T);
            B = pk.B;
            pos_h = pk.positions;
            single_tokens = true;
            for (const auto& s : pk.spans) single_tokens = single_tokens && s.len == 1;
        }
        const int32_t* pos_cpu = pos_h.empty() ? nullptr : pos_h.data();
        const int C = NH * hs, C3 = C + 2 * KV * hs;
        const size_t n_qkv = static_cast<size_t>(B) * T * C3, n_out = static_cast<size_t>(B) * T * C,
                     n_lse = static_cast<size_t>(B) * NH * T;
        std::vector<uint16_t> qkv_h, dout_h;
        std::vector<float> qkv_f, dout_f;
        random_bf16(n_qkv, base_seed() * 7919u + 2 * k, sigma, qkv_h, qkv_f);
        random_bf16(n_out, base_seed() * 7919u + 2 * k + 1, 1.0f, dout_h, dout_f);

        std::vector<float> out_ref(n_out), lse_ref(n_lse), dqkv_ref(n_qkv);
        cpu::attention_forward(out_ref.data(), lse_ref.data(), qkv_f.data(), B, T, C, NH, KV, pos_cpu);
        cpu::attention_backward(dqkv_ref.data(), dout_f.data(), qkv_f.data(), out_ref.data(), lse_ref.data(), B, T, C,
                                NH, KV, pos_cpu);

        DevBuf<uint16_t> qkv(n_qkv), dout(n_out), out(n_out), dqkv(n_qkv);
        DevBuf<float> lse(n_lse);
        DevBuf<int32_t> pos(std::max<size_t>(pos_h.size(), 1));
        qkv.upload(qkv_h);
        dout.upload(dout_h);
        if (pos_cpu) pos.upload(pos_h);
        const int32_t* pos_dev = pos_cpu ? pos.get() : nullptr;
        cudaStream_t s = cuda::stream();
        flash_attention_forward(out.bf(), lse.get(), qkv.bf(), B, T, C, NH, KV, s, pos_dev);
        flash_attention_backward(dqkv.bf(), dout.bf(), qkv.bf(), out.bf(), lse.get(), B, T, C, NH, KV, s, nullptr,
                                 pos_dev);
        cuda::synchronize();
        const auto out_g = out.download(), dqkv_g = dqkv.download();
        const auto lse_g = lse.download();

        const auto out_w = widen(out_g), dqkv_w = widen(dqkv_g);
        expect_rel("out", compare(out_w, out_ref, [](size_t) { return true; }), T, hs);
        const char* names[3] = {"dq", "dk", "dv"};
        // The part of a qkv row channel c belongs to: q [0, C), k [C, C + KV*hs), v after.
        const size_t kvw = static_cast<size_t>(KV) * hs;
        auto part_of = [&](size_t i) {
            const size_t c = i % static_cast<size_t>(C3);
            return c < static_cast<size_t>(C) ? 0u : c < C + kvw ? 1u : 2u;
        };
        for (size_t part = 0; part < 3; part++) {
            const Err e = compare(dqkv_w, dqkv_ref, [&](size_t i) { return part_of(i) == part; });
            if (single_tokens && part < 2) {
                // One token (T = 1, or examples of one token each): P = 1 and D = dout.out = dout.v = dP, so
                // dS = P (dP - D) and with it dq and dk are exactly zero; both sides hold only fp32 summation
                // noise (~1e-6), so judge it absolutely.
                std::printf("[flash-attn] T=%-5d hs=%-3d %-4s max abs %.2e (exactly 0 in exact arithmetic)\n", T, hs,
                            names[part], e.max_abs);
                EXPECT_TRUE(e.finite) << names[part];
                EXPECT_LE(e.max_abs, 1e-4) << names[part];
            } else {
                expect_rel(names[part], e, T, hs);
            }
        }
        const Err le = compare(lse_g, lse_ref, [](size_t) { return true; });
        std::printf("[flash-attn] T=%-5d hs=%-3d lse  max abs %.2e (tol %.0e)\n", T, hs, le.max_abs, kTolLseAbs);
        EXPECT_TRUE(le.finite) << "lse: non-finite value";
        EXPECT_LE(le.max_abs, kTolLseAbs) << "lse";

        // Rerun into poisoned buffers (the scratch cache is reused now): same bits where the order is fixed.
        out.poison();
        lse.poison();
        dqkv.poison();
        flash_attention_forward(out.bf(), lse.get(), qkv.bf(), B, T, C, NH, KV, s, pos_dev);
        flash_attention_backward(dqkv.bf(), dout.bf(), qkv.bf(), out.bf(), lse.get(), B, T, C, NH, KV, s, nullptr,
                                 pos_dev);
        cuda::synchronize();
        EXPECT_EQ(out.download(), out_g) << "forward output changed between identical runs";
        EXPECT_EQ(lse.download(), lse_g) << "lse changed between identical runs";
        const auto dqkv_2 = dqkv.download();
        if (KV == NH) {
            size_t diff_kv = 0;
            for (size_t i = 0; i < n_qkv; i++)
                if (part_of(i) != 0 && dqkv_2[i] != dqkv_g[i]) diff_kv++;
            EXPECT_EQ(diff_kv, 0u) << "dk/dv changed between identical runs";
        }
        for (size_t part = 0; part < (KV == NH ? 1u : 3u); part++) {
            const Err r2 = compare(widen(dqkv_2), dqkv_ref, [&](size_t i) { return part_of(i) == part; });
            EXPECT_LE(single_tokens && part < 2 ? r2.max_abs : r2.norm_rel,
                      single_tokens && part < 2 ? 1e-4 : kTolNorm)
                << names[part] << " of the rerun";
        }
    }
};

TEST_F(FlashAttention, TileMultipleHs64) { check(2, 128, 2, 64, 1.0f, 1); }
TEST_F(FlashAttention, RaggedHs64) { check(1, 200, 3, 64, 1.0f, 2); }
TEST_F(FlashAttention, RaggedShortHs64) { check(3, 65, 1, 64, 1.0f, 3); }
TEST_F(FlashAttention, SingleTokenHs64) { check(2, 1, 2, 64, 1.0f, 4); }
// Wider scores (sigma 2 on q and k: logits ~ N(0, 16)) make the softmax peaky, so the running max and the
// rescaling of the online softmax matter.
TEST_F(FlashAttention, Gpt2ShapePeakyHs64) { check(1, 1024, 4, 64, 2.0f, 5); }
TEST_F(FlashAttention, RaggedHs128) { check(2, 77, 2, 128, 1.0f, 6); }
TEST_F(FlashAttention, LongRaggedHs128) { check(1, 300, 2, 128, 1.5f, 7); }
TEST_F(FlashAttention, TileMultipleHs128) { check(1, 256, 3, 128, 1.0f, 8); }
// Grouped-query attention, on each of the backward's ways to sum dK/dV over a kv head's query heads
// (flash_attention_kernels.cuh, default_heads_per_block, on an H100's 132 SMs): Llama-3.2-1B's attention for
// one sequence (32 query heads on 8 kv heads of 64, T 2048: 2 of a group's 4 heads per block, so two blocks add
// into the fp32 accumulator per kv head); 4 x 1100 x 16/8, where each block walks its kv head's whole group (dK/dV
// summed in registers, stored directly); multi-query (one kv head) with ragged tiles at hs 128 and peaky scores
// over 6/2 (one query head per block, dK/dV through the accumulator); one token.
TEST_F(FlashAttention, Llama1BShapeGqa) { check(1, 2048, 32, 64, 1.0f, 9, 8); }
TEST_F(FlashAttention, GqaWholeGroupPerBlock) { check(4, 1100, 16, 64, 1.0f, 11, 8); }
TEST_F(FlashAttention, MqaRaggedHs128) { check(2, 200, 4, 128, 1.0f, 12, 1); }
TEST_F(FlashAttention, GqaPeakyRaggedHs64) { check(3, 333, 6, 64, 2.0f, 13, 2); }
TEST_F(FlashAttention, GqaSingleTokenHs128) { check(2, 1, 4, 128, 1.0f, 14, 2); }
// Packed examples (positions restarting at 0 per example), against the CPU op with the same positions: examples
// of one token (first, last, in runs), examples crossing the 64-query and 64/128-key tiles and starting inside
// them, a ragged last tile (T = 333), a row that is one example (plain causal), a row of single tokens, peaky
// scores (a fully masked tile must leave a row's running max alone), multi-head and grouped-query heads on each
// of the backward's dK/dV sums (whole group per block, split over blocks: Llama-3.2-1B's 32 on 8 at B = 1).
TEST_F(FlashAttention, PackedHs64) {
    check(0, 333, 3, 64, 1.0f, 15, 0, {{1, 100, 1, 1, 63, 64, 103}, {333}, {200, 130, 1, 1, 1}});
}
TEST_F(FlashAttention, PackedPeakyGqaHs64) {
    check(0, 300, 6, 64, 2.0f, 16, 2, {{7, 1, 150, 2, 140}, {1, 1, 1, 1, 296}});
}
TEST_F(FlashAttention, PackedHs128) { check(0, 200, 2, 128, 1.0f, 17, 0, {{33, 1, 32, 70, 64}, {1, 199}}); }
TEST_F(FlashAttention, PackedMqaHs128) { check(0, 150, 4, 128, 1.5f, 18, 1, {{40, 40, 40, 30}, {150}}); }
TEST_F(FlashAttention, PackedSingleTokens) { check(0, 70, 4, 64, 1.0f, 19, 2, {std::vector<int>(70, 1)}); }
TEST_F(FlashAttention, PackedLlama1BShape) {
    check(0, 2048, 32, 64, 1.0f, 20, 8, {{300, 1, 700, 47, 1000}});
}
TEST_F(FlashAttention, PackedGqaWholeGroupPerBlock) {
    check(0, 1100, 16, 64, 1.0f, 21, 8, {{100, 1000}, {550, 550}, {1, 1099}, {1099, 1}});
}

// Validation happens before any device call, so this runs (and must throw) with or without a GPU.
TEST(FlashAttentionArgs, RejectsUnsupportedHeadSize) {
    EXPECT_THROW(cuda::flash_attention_forward(nullptr, nullptr, nullptr, 1, 16, 96, 3, 3, nullptr), InternalError);
    EXPECT_THROW(
        cuda::flash_attention_backward(nullptr, nullptr, nullptr, nullptr, nullptr, 1, 16, 256, 1, 1, nullptr),
        InternalError);
    EXPECT_THROW(cuda::flash_attention_forward(nullptr, nullptr, nullptr, 1, 0, 128, 2, 2, nullptr), InternalError);
    // 3 query heads over 2 kv heads is no grouping.
    EXPECT_THROW(cuda::flash_attention_forward(nullptr, nullptr, nullptr, 1, 16, 192, 3, 2, nullptr), InternalError);
}

}  // namespace
}  // namespace llmt::kernels
