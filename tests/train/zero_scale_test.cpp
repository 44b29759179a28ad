// ZeRO stages on paper (train/zero_scale.h): the figures docs/distributed.md prints for Llama-3.1-8B
// (8.03e9 parameters, the largest piece its 525M-parameter embedding), worked out by hand here.
#include <gtest/gtest.h>

#include "train/zero_scale.h"

using namespace llmt::train;

namespace {

ScaleModel llama8b() {
    ScaleModel m;
    m.parameters = 8.03e9;
    m.embedding = 128256.0 * 4096;
    m.tied = false;
    m.largest_layer = (m.parameters - 2 * m.embedding) / 32;
    return m;
}

}  // namespace

TEST(ZeroScale, BytesPerParameterAtEachStage) {
    const ScaleModel m = llama8b();
    const double P = m.parameters;
    // bf16 with fp32 masters and AdamW: 4 master + 2 copy + 4 gradient + 8 moments = 18 bytes whole.
    EXPECT_DOUBLE_EQ(stage_cost(m, ZeroStage::k0, 8).bytes_per_gpu, 18 * P);
    // ZeRO-1 (sharded masters): the bf16 copy and the gradient whole, the 4 bytes of master and 8 of moments
    // divided by N.
    EXPECT_DOUBLE_EQ(stage_cost(m, ZeroStage::k1, 8).bytes_per_gpu, 6 * P + 12 * P / 8);
    // ZeRO-3: masters, gradient accumulator and moments divided (16 bytes), plus the four gather buffers
    // (embeddings, untied head, two blocks) in bf16 with fp32 gradients.
    EXPECT_DOUBLE_EQ(stage_cost(m, ZeroStage::k3, 8).bytes_per_gpu,
                     16 * P / 8 + 6 * (2 * 128256.0 * 4096 + 2 * m.largest_layer));
    // Ring volumes: DDP all-reduce 2(N-1)/N x 4P; ZeRO-1 an fp32 reduce-scatter and a bf16 all-gather
    // (the fp32 weights without bf16); ZeRO-3 two bf16 gathers and one fp32 reduce-scatter.
    EXPECT_DOUBLE_EQ(stage_cost(m, ZeroStage::k0, 8).comm_bytes, 2 * 7.0 / 8 * 4 * P);
    EXPECT_DOUBLE_EQ(stage_cost(m, ZeroStage::k1, 8).comm_bytes, 7.0 / 8 * 6 * P);
    ScaleModel fp32 = m;
    fp32.bf16 = false;
    EXPECT_DOUBLE_EQ(stage_cost(fp32, ZeroStage::k1, 8).comm_bytes, 7.0 / 8 * 8 * P);
    EXPECT_DOUBLE_EQ(stage_cost(fp32, ZeroStage::k0, 8).bytes_per_gpu, 16 * P);
    // Without a bf16 copy the fp32 weights are the compute weights: whole, only the moments divided.
    EXPECT_DOUBLE_EQ(stage_cost(fp32, ZeroStage::k1, 8).bytes_per_gpu, 8 * P + 8 * P / 8);
    EXPECT_DOUBLE_EQ(stage_cost(m, ZeroStage::k3, 8).comm_bytes, 7.0 / 8 * 8 * P);
}

TEST(ZeroScale, ChoosesTheLowestStageThatFits) {
    const ScaleModel m = llama8b();
    // 141 GB GPUs with 20 GB kept for activations: 18 x 8.03e9 = 144.5 GB does not fit one GPU; ZeRO-1 on 2
    // needs 6P + 12P/2 = 96 GB.
    StageChoice c = choose_stage(m, 141e9, 20e9, {1, 2, 4, 8});
    EXPECT_EQ(c.world, 2);
    EXPECT_EQ(c.stage, "1");
    // 70B-like: 70.55e9 parameters; ZeRO-1 keeps 6 bytes each whole (423 GB): only stage 3 fits, on 16.
    ScaleModel big;
    big.parameters = 70.55e9;
    big.embedding = 128256.0 * 8192;
    big.tied = false;
    big.largest_layer = (big.parameters - 2 * big.embedding) / 80;
    c = choose_stage(big, 141e9, 20e9, {1, 2, 4, 8, 16, 32, 64});
    EXPECT_EQ(c.stage, "3");
    EXPECT_EQ(c.world, 16);
    EXPECT_TRUE(choose_stage(big, 141e9, 20e9, {1, 2, 4}).stage.empty());
}
