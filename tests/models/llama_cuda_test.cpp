// LLaMA on CUDA vs the CPU through models/llama (the same model code; kernels/ops.h dispatches on the
// arenas' device): fp32 forward + backward to 1e-4, and a bf16 mixed-precision step tracking the fp32 CPU
// one, for grouped-query attention at head size 64 (the tensor-core and cuDNN attention paths) with
// llama3 RoPE scaling, tied and untied; Qwen2's q/k/v biases on the same graph. Label `gpu`: skipped, saying so, without a CUDA device.
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

// Adapters with random A and B (a fresh B is zero, which would leave A without gradient), the same values
// on both models.
void randomize_adapters(Model& cpu, Model& gpu, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> n(0.f, 0.1f);
    for (ParamId i = 0; i < cpu.param_specs().size(); ++i) {
        std::vector<float> v(static_cast<size_t>(cpu.params().view(i).numel()));
        for (float& x : v) x = n(rng);
        cpu.trained().write_f32(i, v.data());
        gpu.trained().write_f32(i, v.data());
    }
    cpu.sync_compute_params();
    gpu.sync_compute_params();
}

// The q/k/v biases start at zero (HF's init too), where a bias the forward dropped would go unseen: the
// same random values on both models.
void randomize_biases(Model& cpu, Model& gpu, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> n(0.f, 0.5f);
    int biases = 0;
    for (ParamId i = 0; i < cpu.param_specs().size(); ++i) {
        if (cpu.param_specs()[i].name.find("bias") == std::string::npos) continue;
        std::vector<float> v(static_cast<size_t>(cpu.params().view(i).numel()));
        for (float& x : v) x = n(rng);
        cpu.trained().write_f32(i, v.data());
        gpu.trained().write_f32(i, v.data());
        ++biases;
    }
    ASSERT_GT(biases, 0) << "no bias tensor among the parameters";
    cpu.sync_compute_params();
    gpu.sync_compute_params();
}

// Qwen2 on CUDA: the LLaMA graph with q/k/v biases, which ride the qkv GEMM's bias epilogue as GPT-2's do
// (families on the LLaMA graph, docs/hf_models.md); fp32 forward + backward to the same 1e-4 (the bias
// gradients among the compared tensors), and a bf16 step tracking the fp32 CPU one, untied and tied.
TEST(LlamaCuda, Qwen2BiasStepMatchesCpu) {
    if (kernels::device_count(Device::kCuda) == 0) GTEST_SKIP() << "no CUDA device (or built without CUDA): skipped";
    for (bool tied : {false, true}) {
        const uint32_t seed = std::random_device{}();
        std::printf("[qwen2-cuda-vs-cpu] %s, seed %u\n", tied ? "tied" : "untied", seed);
        LlamaConfig c = small(tied, 64);
        c.arch = "qwen2";
        c.qkv_bias = true;
        c.rope_theta = 1000000.0;
        c.rope_scaling = {};
        Llama cpu(c), gpu(c, Device::kCuda);
        cpu.init_random(seed);
        gpu.init_random(seed);
        randomize_biases(cpu, gpu, seed);
        testing::expect_fp32_step_matches(cpu, gpu, seed, 3, 61, "qwen2-cuda-vs-cpu");
        LlamaConfig cb = c;
        cb.block_size = 128;
        Llama cpu2(cb), gpu2(cb, Device::kCuda, DType::kBF16);
        cpu2.init_random(seed);
        gpu2.init_random(seed);
        randomize_biases(cpu2, gpu2, seed);
        testing::expect_bf16_step_tracks(cpu2, gpu2, seed, 4, 128, "qwen2-bf16-vs-cpu");
    }
}

// LoRA on CUDA (kernels::lora_forward/backward: the parts as column blocks through cuBLASLt's leading
// dimensions) against the CPU: fp32 to the same 1e-4, and a bf16 step over a frozen bf16 base (no fp32
// master, no gradient arena) tracking the fp32 CPU one, with trainer.recompute all re-running the adapters.
TEST(LlamaCuda, LoraStepMatchesCpu) {
    if (kernels::device_count(Device::kCuda) == 0) GTEST_SKIP() << "no CUDA device (or built without CUDA): skipped";
    const uint32_t seed = std::random_device{}();
    std::printf("[llama-lora-cuda-vs-cpu] seed %u\n", seed);
    LlamaConfig c = small(false, 64);
    c.lora.r = 8;
    c.lora.alpha = 16;
    c.lora.target_modules = {"q_proj", "v_proj", "o_proj", "up_proj", "down_proj"};
    Llama cpu(c), gpu(c, Device::kCuda);
    cpu.init_random(seed);
    gpu.init_random(seed);
    randomize_adapters(cpu, gpu, seed);
    testing::expect_fp32_step_matches(cpu, gpu, seed, 3, 61, "llama-lora-cuda-vs-cpu");

    LlamaConfig cb = small(true, 128);
    cb.lora = c.lora;
    cb.lora.rslora = true;
    Llama cpu2(cb);
    cb.recompute = Recompute::kAll;
    Llama gpu2(cb, Device::kCuda, DType::kBF16);
    EXPECT_EQ(gpu2.base().grad_bytes(), 0u);
    EXPECT_EQ(gpu2.base().params().entry(0).dtype, DType::kBF16);  // the frozen base holds bf16 only
    cpu2.init_random(seed);
    gpu2.init_random(seed);
    randomize_adapters(cpu2, gpu2, seed + 1);
    testing::expect_bf16_step_tracks(cpu2, gpu2, seed, 4, 128, "llama-lora-bf16-vs-cpu");
}

}  // namespace
}  // namespace llmt::models
