// GPT-2 on CUDA vs the CPU through models/gpt2 (the same model code; kernels/ops.h dispatches on the
// arenas' device): same initialisation, then loss, every parameter gradient and the parameters after an
// AdamW step compared. Label `gpu`: skipped, saying so, without a CUDA device. Fresh random tokens per run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "cuda_compare.h"
#include "kernels/ops.h"
#include "models/gpt2.h"

namespace llmt::models {
namespace {

using testing::rel_err;
using testing::to_host;

TEST(Gpt2Cuda, ForwardBackwardAdamWMatchCpu) {
    if (kernels::device_count(Device::kCuda) == 0) GTEST_SKIP() << "no CUDA device (or built without CUDA): skipped";
    const uint32_t seed = std::random_device{}();
    std::printf("[gpt2-cuda-vs-cpu] seed %u\n", seed);
    Gpt2Config c;
    c.n_layer = 2;
    c.n_head = 4;
    c.d_model = 128;
    c.d_ff = 512;
    c.block_size = 64;
    c.vocab_size = 1000;
    c.padded_vocab = 1024;
    Gpt2 cpu(c), gpu(c, Device::kCuda);
    ASSERT_EQ(gpu.params().device(), Device::kCuda);
    cpu.init_random(seed);
    gpu.init_random(seed);
    for (size_t i = 0; i < cpu.param_specs().size(); i++)
        ASSERT_EQ(to_host(gpu.params().view(i)), to_host(cpu.params().view(i))) << cpu.param_specs()[i].name;

    const int B = 3, T = 61;
    testing::expect_fp32_step_matches(cpu, gpu, seed, B, T, "gpt2-cuda-vs-cpu");

    // One AdamW step per tensor on each backend, both from the CPU's gradients: AdamW's first step is
    // about lr * g / (|g| + eps), a sign-like function that turns last-bit gradient differences on
    // elements with |g| near eps into O(lr) parameter differences, so the step is checked on identical
    // inputs (element-wise fp32 arithmetic on both sides: 1e-6 relative).
    for (size_t i = 0; i < cpu.param_specs().size(); i++) kernels::copy(gpu.grads().view(i), cpu.grads().view(i));
    kernels::AdamWParams hp;
    hp.lr = 1e-3f;
    hp.weight_decay = 0.1f;
    for (Gpt2* m : {&cpu, &gpu}) {
        Arena mv;
        for (size_t i = 0; i < m->param_specs().size(); i++) {
            mv.add("m" + std::to_string(i), m->params().entry(i).shape);
            mv.add("v" + std::to_string(i), m->params().entry(i).shape);
        }
        mv.allocate(true, m->device());
        for (size_t i = 0; i < m->param_specs().size(); i++)
            kernels::adamw_update(m->params().view(i), mv.view(2 * i), mv.view(2 * i + 1), m->grads().view(i), hp);
        kernels::synchronize(m->device());
    }
    constexpr double kTolStep = 1e-6;
    double worst_p = 0;
    for (size_t i = 0; i < cpu.param_specs().size(); i++)
        worst_p = std::max(worst_p, rel_err(to_host(gpu.params().view(i)), to_host(cpu.params().view(i))));
    std::printf("[gpt2-cuda-vs-cpu] params after one AdamW step: max rel err %.2e (tol %.0e)\n", worst_p, kTolStep);
    EXPECT_LE(worst_p, kTolStep);

    // Evaluation forward (no gradient) after the update.
    std::mt19937 rng(seed);
    std::vector<int32_t> in(B * T), tg(B * T);
    for (auto& x : in) x = static_cast<int32_t>(rng() % c.vocab_size);
    for (auto& x : tg) x = static_cast<int32_t>(rng() % c.vocab_size);
    const float ec = cpu.forward(in.data(), tg.data(), B, T, false);
    const float eg = gpu.forward(in.data(), tg.data(), B, T, false);
    std::printf("[gpt2-cuda-vs-cpu] eval loss after the step cpu %.6f cuda %.6f\n", ec, eg);
    EXPECT_LE(std::fabs(eg - ec) / ec, 1e-4);
}

// A whole bf16 mixed-precision step on the GPU (bf16 weights copy, activations, tensor-core matmuls and
// attention) against the fp32 CPU step from the same initialisation and tokens. head size 64 and T 128
// so the tensor-core attention path runs when it is built.
TEST(Gpt2Cuda, Bf16StepTracksCpuFp32) {
    if (kernels::device_count(Device::kCuda) == 0) GTEST_SKIP() << "no CUDA device (or built without CUDA): skipped";
    const uint32_t seed = std::random_device{}();
    std::printf("[gpt2-bf16-vs-cpu] seed %u\n", seed);
    Gpt2Config c;
    c.n_layer = 2;
    c.n_head = 2;
    c.d_model = 128;
    c.d_ff = 512;
    c.block_size = 128;
    c.vocab_size = 1000;
    c.padded_vocab = 1024;
    Gpt2 cpu(c), gpu(c, Device::kCuda, DType::kBF16);
    cpu.init_random(seed);
    gpu.init_random(seed);
    ASSERT_EQ(gpu.compute_params().dtype, DType::kBF16);
    testing::expect_bf16_step_tracks(cpu, gpu, seed, 4, 128, "gpt2-bf16-vs-cpu");
}

TEST(Gpt2Cuda, DeviceModelRefusesBadIdsOnTheHost) {
    if (kernels::device_count(Device::kCuda) == 0) GTEST_SKIP() << "no CUDA device (or built without CUDA): skipped";
    Gpt2Config c;
    c.n_layer = 1;
    c.n_head = 2;
    c.d_model = 32;
    c.d_ff = 64;
    c.block_size = 8;
    c.vocab_size = 50;
    c.padded_vocab = 64;
    Gpt2 gpu(c, Device::kCuda);
    std::vector<int32_t> in(8, 3), tg(8, 4);
    in[5] = 64;  // >= Vp
    EXPECT_THROW(gpu.forward(in.data(), tg.data(), 1, 8, true), InputError);
    in[5] = 3;
    tg[2] = 50;  // >= V
    EXPECT_THROW(gpu.forward(in.data(), tg.data(), 1, 8, true), InputError);
}

}  // namespace
}  // namespace llmt::models
