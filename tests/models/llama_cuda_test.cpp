// LLaMA on CUDA vs the CPU through models/llama (the same model code; kernels/ops.h dispatches on the
// arenas' device): fp32 forward + backward to 1e-4, and a bf16 mixed-precision step tracking the fp32 CPU
// one, for grouped-query attention at head size 64 (the tensor-core and cuDNN attention paths) with
// llama3 RoPE scaling, tied and untied. Label `gpu`: skipped, saying so, without a CUDA device.
#include <gtest/gtest.h>

#include <random>

#include "cuda_compare.h"
#include "kernels/ops.h"
#include "models/llama.h"

namespace llmt::models {
namespace {

LlamaConfig small(bool tied, int T) {
    LlamaConfig c;
    c.n_layer = 2;
    c.n_head = 4;
    c.n_kv_head = 2;
    c.d_model = 256;  // head size 64
    c.d_ff = 512;
    c.block_size = T;
    c.vocab_size = 1000;
    c.padded_vocab = 1024;
    c.tie_embeddings = tied;
    c.rope_theta = 500000.0;
    c.rope_scaling = {"llama3", 8.0, 1.0, 4.0, 32};
    return c;
}

TEST(LlamaCuda, Fp32StepMatchesCpu) {
    if (kernels::device_count(Device::kCuda) == 0) GTEST_SKIP() << "no CUDA device (or built without CUDA): skipped";
    for (bool tied : {true, false}) {
        const uint32_t seed = std::random_device{}();
        std::printf("[llama-cuda-vs-cpu] %s, seed %u\n", tied ? "tied" : "untied", seed);
        Llama cpu(small(tied, 64)), gpu(small(tied, 64), Device::kCuda);
        cpu.init_random(seed);
        gpu.init_random(seed);
        testing::expect_fp32_step_matches(cpu, gpu, seed, 3, 61, "llama-cuda-vs-cpu");
    }
}

TEST(LlamaCuda, Bf16StepTracksCpuFp32) {
    if (kernels::device_count(Device::kCuda) == 0) GTEST_SKIP() << "no CUDA device (or built without CUDA): skipped";
    for (Recompute r : {Recompute::kNone, Recompute::kAll}) {
        const uint32_t seed = std::random_device{}();
        std::printf("[llama-bf16-vs-cpu] recompute %s, seed %u\n", r == Recompute::kAll ? "all" : "none", seed);
        LlamaConfig c = small(true, 128);
        Llama cpu(c);
        c.recompute = r;
        Llama gpu(c, Device::kCuda, DType::kBF16);
        cpu.init_random(seed);
        gpu.init_random(seed);
        testing::expect_bf16_step_tracks(cpu, gpu, seed, 4, 128, "llama-bf16-vs-cpu");
    }
}

}  // namespace
}  // namespace llmt::models
