// LLaMA on CUDA vs the CPU through models/llama (the same model code; kernels/ops.h dispatches on the
// arenas' device): fp32 forward + backward to 1e-4, and a bf16 mixed-precision step tracking the fp32 CPU
// one, for grouped-query attention at head size 64 (the tensor-core and cuDNN attention paths) with
// llama3 RoPE scaling, tied and untied; Qwen2's q/k/v biases, Qwen3's per-head q/k norms and Mistral's sliding
// window on the same graph (training and greedy decoding). Label `gpu`: skipped, saying so, without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "cuda_compare.h"
#include "kernels/ops.h"
#include "models/language_model.h"
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

// Sets every parameter whose name contains `part` to the same N(mean, stddev) values on both models (the q/k
// norm weights start at one, HF's init too, where a weight the GPU kernel dropped would go unseen).
void randomize_named(Model& cpu, Model& gpu, uint32_t seed, const std::string& part, float mean, float stddev) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> n(mean, stddev);
    int found = 0;
    for (ParamId i = 0; i < cpu.param_specs().size(); ++i) {
        if (cpu.param_specs()[i].name.find(part) == std::string::npos) continue;
        std::vector<float> v(static_cast<size_t>(cpu.params().view(i).numel()));
        for (float& x : v) x = n(rng);
        cpu.trained().write_f32(i, v.data());
        gpu.trained().write_f32(i, v.data());
        ++found;
    }
    ASSERT_GT(found, 0) << "no tensor named *" << part << "* among the parameters";
    cpu.sync_compute_params();
    gpu.sync_compute_params();
}

// The q/k/v biases start at zero (HF's init too), where a bias the forward dropped would go unseen: the
// same random values on both models.
void randomize_biases(Model& cpu, Model& gpu, uint32_t seed) { randomize_named(cpu, gpu, seed, "bias", 0.f, 0.5f); }

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

// Qwen3: per-head q/k RMSNorm before RoPE, head_dim 64 with d_model / n_head = 48.
LlamaConfig qwen3(int T) {
    LlamaConfig c = small(false, T);
    c.arch = "qwen3";
    c.d_model = 192;
    c.head_dim = 64;
    c.qk_norm = true;
    c.norm_eps = 1e-6f;
    c.rope_theta = 1000000.0;
    c.rope_scaling = {};
    return c;
}

// Mistral: a sliding window of 16 keys, shorter than every sequence below.
LlamaConfig mistral(int T) {
    LlamaConfig c = small(false, T);
    c.arch = "mistral";
    c.sliding_window = 16;
    c.rope_theta = 10000.0;
    c.rope_scaling = {};
    return c;
}

// Greedy decoding: the GPU model's full forward over the sequence so far (fp32; its last row's logits) against
// the CPU's KV-cache decoder, token for token. Both continue with the CPU's token, so one near-tie cannot derail
// the rest; a step whose argmax differs passes only when the CPU's two best logits are within 1e-3 of the largest
// |logit| (the fp32 sides agree to ~1e-5 there, expect_fp32_step_matches' bound, so only a near-tie can flip it).
void expect_greedy_matches(Llama& cpu, Llama& gpu, uint32_t seed, int prompt, int steps, const char* tag) {
    const int V = cpu.dims().vocab_size, Vp = cpu.dims().padded_vocab;
    std::mt19937 rng(seed);
    std::vector<int32_t> ids(static_cast<size_t>(prompt));
    for (auto& x : ids) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(V));
    const auto dec = cpu.decoder();
    const float* lc = dec->prefill(std::span<const int32_t>(ids.data(), ids.size()));
    int flips = 0;
    double worst = 0;
    for (int s = 0; s < steps; ++s) {
        const int n = static_cast<int>(ids.size());
        gpu.forward(ids.data(), nullptr, 1, n, false);
        const std::vector<float> cpu_row(lc, lc + V);
        const std::vector<float> gpu_row(gpu.logits() + static_cast<size_t>(n - 1) * Vp,
                                         gpu.logits() + static_cast<size_t>(n - 1) * Vp + V);
        worst = std::max(worst, testing::rel_err(gpu_row, cpu_row));
        const auto best_c = std::max_element(cpu_row.begin(), cpu_row.end()) - cpu_row.begin();
        const auto best_g = std::max_element(gpu_row.begin(), gpu_row.end()) - gpu_row.begin();
        if (best_c != best_g) {
            double scale = 0;
            for (float x : cpu_row) scale = std::max(scale, static_cast<double>(std::fabs(x)));
            const double gap = cpu_row[static_cast<size_t>(best_c)] - cpu_row[static_cast<size_t>(best_g)];
            EXPECT_LE(gap, 1e-3 * scale) << tag << ": step " << s << " cpu token " << best_c << ", cuda " << best_g;
            ++flips;
        }
        ids.push_back(static_cast<int32_t>(best_c));
        if (s + 1 < steps) lc = dec->step(static_cast<int32_t>(best_c));
    }
    std::printf("[%s] greedy: %d tokens after a prompt of %d, %d near-tie flips, last-row logits max rel err %.2e\n",
                tag, steps, prompt, flips, worst);
    EXPECT_LE(worst, 1e-4) << tag;
}

// Qwen3 on CUDA (the per-head q/k norms: kernels::head_rmsnorm_forward/backward on the GPU) against the CPU: fp32
// forward + backward to 1e-4 (the norm weights' gradients among the compared tensors), a bf16 step tracking the
// fp32 CPU one (head size 64: the flash or cuDNN attention), and greedy decoding.
TEST(LlamaCuda, Qwen3QkNormStepMatchesCpu) {
    if (kernels::device_count(Device::kCuda) == 0) GTEST_SKIP() << "no CUDA device (or built without CUDA): skipped";
    const uint32_t seed = std::random_device{}();
    std::printf("[qwen3-cuda-vs-cpu] seed %u\n", seed);
    Llama cpu(qwen3(64)), gpu(qwen3(64), Device::kCuda);
    cpu.init_random(seed);
    gpu.init_random(seed);
    randomize_named(cpu, gpu, seed, "_norm.weight", 1.0f, 0.3f);
    testing::expect_fp32_step_matches(cpu, gpu, seed, 3, 61, "qwen3-cuda-vs-cpu");
    expect_greedy_matches(cpu, gpu, seed, 8, 24, "qwen3-cuda-vs-cpu");
    for (Recompute r : {Recompute::kNone, Recompute::kAll}) {
        LlamaConfig cb = qwen3(128);
        Llama cpu2(cb);
        cb.recompute = r;
        Llama gpu2(cb, Device::kCuda, DType::kBF16);
        cpu2.init_random(seed);
        gpu2.init_random(seed);
        randomize_named(cpu2, gpu2, seed, "_norm.weight", 1.0f, 0.3f);
        testing::expect_bf16_step_tracks(cpu2, gpu2, seed, 4, 128, "qwen3-bf16-vs-cpu");
    }
}

// Mistral on CUDA with a window (16) shorter than the sequences: fp32 forward + backward (the fp32 attention
// kernels' window) to 1e-4, a bf16 step (the flash kernels' window; cuDNN has none) tracking the fp32 CPU one,
// and greedy decoding well past the window (prompt and continuation 48 tokens).
TEST(LlamaCuda, MistralWindowStepMatchesCpu) {
    if (kernels::device_count(Device::kCuda) == 0) GTEST_SKIP() << "no CUDA device (or built without CUDA): skipped";
    const uint32_t seed = std::random_device{}();
    std::printf("[mistral-cuda-vs-cpu] seed %u\n", seed);
    Llama cpu(mistral(64)), gpu(mistral(64), Device::kCuda);
    cpu.init_random(seed);
    gpu.init_random(seed);
    testing::expect_fp32_step_matches(cpu, gpu, seed, 3, 61, "mistral-cuda-vs-cpu");
    expect_greedy_matches(cpu, gpu, seed, 8, 40, "mistral-cuda-vs-cpu");
    Llama cpu2(mistral(128)), gpu2(mistral(128), Device::kCuda, DType::kBF16);
    cpu2.init_random(seed);
    gpu2.init_random(seed);
    testing::expect_bf16_step_tracks(cpu2, gpu2, seed, 4, 128, "mistral-bf16-vs-cpu");
}

}  // namespace
}  // namespace llmt::models
