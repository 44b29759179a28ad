// The fused LM head (models/lm_head.h) on the CPU: any chunking of the rows gives the plain computation's
// per-row losses, dx and dW (a float64 reference that materialises every logit); the chunk-size rule and its
// knob; the memory plan counting the chunk; and every language family (tied and untied, full fine-tuning and
// LoRA, packed rows, ignored targets) giving the same loss and trained gradients as one chunk of all rows.
#include "models/lm_head.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/knobs.h"
#include "lm_head_cases.h"
#include "models/llama.h"
#include "small_configs.h"

namespace llmt::models {
namespace {

using namespace head_cases;

TEST(LmHead, AnyChunkingMatchesThePlainComputation) {
    const Problem p = problem(5);
    const Reference ref = reference(p);
    for (int64_t rows : {int64_t{1}, int64_t{5}, int64_t{16}, p.BT}) {
        for (bool train : {true, false}) {
            const HeadOut out = run_head_problem(p, Device::kCpu, DType::kF32, rows, train);
            // fp32 GEMMs over K <= 64 and a float softmax: ~1e-6 relative; 1e-5 leaves room for the BLAS's order.
            EXPECT_LT(rel_l2(out.losses, ref.losses), 1e-5) << rows << " rows, train " << train;
            if (!train) continue;
            EXPECT_LT(rel_l2(out.dx, ref.dx), 1e-5) << rows << " rows";  // every row written (poisoned first)
            EXPECT_LT(rel_l2(out.dw, ref.dw), 1e-5) << rows << " rows";
            for (int64_t v = p.V; v < p.Vp; ++v)  // padding rows of the head get no gradient
                for (int64_t c = 0; c < p.C; ++c) EXPECT_EQ(out.dw[static_cast<size_t>(v * p.C + c)], 0.f);
        }
    }
}

TEST(LmHead, ChunkRowsFollowTheBudgetAndTheKnob) {
    const int64_t Vp = 128256;
    const size_t row = Vp * 2;  // bf16 logits
    // Little activation memory: the floor of kLmHeadMinRows rows (all rows when fewer).
    EXPECT_EQ(lm_head_chunk_rows(8192, Vp, 2, 1 << 20), kLmHeadMinRows);
    EXPECT_EQ(lm_head_chunk_rows(1000, Vp, 2, 1 << 20), 1000);
    // A budget of 1/16 of the activations: 5000 rows' worth -> 2 equal chunks of 8192 rows.
    EXPECT_EQ(lm_head_chunk_rows(8192, Vp, 2, 16 * 5000 * row), 4096);
    EXPECT_EQ(lm_head_chunk_rows(65536, Vp, 2, 16 * 7000 * row), 6554);  // 10 chunks: ceil(65536 / 10)
    EXPECT_EQ(lm_head_chunk_rows(8192, Vp, 2, 16 * 9000 * row), 8192);   // the whole batch fits the budget
    for (int64_t BT : {int64_t{1}, int64_t{7}, int64_t{8192}, int64_t{131072}})
        for (size_t act : {size_t{0}, size_t{1} << 30, size_t{1} << 40}) {
            const int64_t rows = lm_head_chunk_rows(BT, Vp, 2, act);
            EXPECT_GE(rows, 1);
            EXPECT_LE(rows, BT);
        }
    {
        const ScopedKnob all(Knob::kLmHeadRows, "all");
        EXPECT_EQ(lm_head_chunk_rows(65536, Vp, 2, 0), 65536);
    }
    const ScopedKnob forced(Knob::kLmHeadRows, "1024");
    EXPECT_EQ(lm_head_chunk_rows(65536, Vp, 2, size_t{1} << 40), 1024);
    EXPECT_EQ(lm_head_chunk_rows(100, Vp, 2, 0), 100);
}

LlamaConfig small_llama() { return test::small_llama(64); }

TEST(LmHead, MemoryPlanCountsTheChunk) {
    const int B = 2, T = 64;
    auto activations = [&](const char* rows) {
        const ScopedKnob k(Knob::kLmHeadRows, rows);
        return Llama(small_llama()).memory_plan(B, T).activations;
    };
    // fp32 logits: (128 - 16) rows of 64 columns more with one chunk of all rows (alignment gaps aside).
    const auto all = activations("all"), chunked = activations("16");
    EXPECT_NEAR(static_cast<double>(all - chunked), (B * T - 16) * 64 * 4.0, 256.0);
}

class LmHeadFamilies : public ::testing::TestWithParam<HeadCase> {};

TEST_P(LmHeadFamilies, ChunkedEqualsOneChunkOfAllRows) {
    const HeadCase& c = GetParam();
    const HeadRun whole = run_head_case(c, Device::kCpu, DType::kF32, "all");
    const HeadRun chunked = run_head_case(c, Device::kCpu, DType::kF32, "16");
    ASSERT_EQ(whole.grads.size(), chunked.grads.size());
    // fp32 on both sides; the rows' logits and dx are the same GEMMs on fewer rows, dW a sum over three chunks
    // instead of one: differences are rounding, ~1e-7 relative.
    EXPECT_NEAR(chunked.loss, whole.loss, 1e-6 * std::fabs(whole.loss)) << c.name();
    EXPECT_GT(whole.loss, 1.f) << c.name();
    for (size_t i = 0; i < whole.grads.size(); ++i) {
        double norm = 0;
        for (float g : whole.grads[i]) norm += static_cast<double>(g) * g;
        // Every trained tensor gets a gradient (the LoRA adapters through the head's dx), so the comparison is
        // never of zeros; GPT-2's padding rows of wte are the one part that stays 0.
        EXPECT_GT(norm, 0.0) << c.name() << " " << whole.names[i];
        EXPECT_LT(rel_l2(chunked.grads[i], whole.grads[i]), 1e-5) << c.name() << " " << whole.names[i];
    }
}

INSTANTIATE_TEST_SUITE_P(Registry, LmHeadFamilies, ::testing::ValuesIn(all_head_cases()), test_name);

}  // namespace
}  // namespace llmt::models
