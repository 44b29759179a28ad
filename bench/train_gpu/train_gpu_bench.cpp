// bench/train_gpu: our CUDA engine's training step through the model layer (the same model code as the
// CPU engine; kernels/ops.h dispatches to kernels/cuda): first a small model's forward + backward on the
// CPU and on the GPU from the same initialisation (loss and every gradient compared), then the benchmark
// model timed per whole step as the trainer runs it (zero_grad, forward, backward, grad norm, clip, AdamW
// over the parameter runs with the bf16 copy refreshed, synchronise), median over the timed steps:
//   --arch gpt2:  GPT-2 124M (12 layers, d 768, T 1024, vocab 50257 padded to 50304);
//   --arch llama: Llama-3.2-1B's shape (16 layers, d 2048, 32 heads / 8 KV heads, FFN 8192, vocab 128,256,
//                 tied, RoPE theta 500k with llama3 scaling; bench/train_gpu_llama runs it, T 2048);
//   --arch llama3.1-8b: Llama-3.1-8B's shape (32 layers, d 4096, 32 heads / 8 KV heads, FFN 14336, vocab
//                 128,256, untied, RoPE theta 500k with llama3 scaling factor 8; with --lora: the frozen base
//                 alone is 16 GB, full training's fp32 masters and AdamW state do not fit one GPU);
//   --arch qwen2.5-1.5b: Qwen2.5-1.5B's shape (28 layers, d 1536, 12 heads / 2 KV heads of 128, q/k/v biases,
//                 FFN 8960, vocab 151,936, tied, RoPE theta 1e6);
//   --arch qwen3-1.7b: Qwen3-1.7B's shape (28 layers, d 2048, 16 heads / 8 KV heads of 128, per-head q/k
//                 RMSNorm, FFN 6144, vocab 151,936, tied, RoPE theta 1e6).
// Random tokens, bf16 mixed precision by default. Also measures the dense bf16 matmul rate (8192^3 through
// the same cuBLASLt path) for the MFU figure, and the GPU memory the step holds beyond the CUDA context.
// torch_gpu_gpt2.py / bench/train_gpu_llama/torch_gpu_llama.py run the PyTorch peers; run.sh runs both in one
// device call and compare.py prints the side-by-side table.
// Usage: train_gpu_bench [--arch gpt2|llama|llama3.1-8b|qwen2.5-1.5b|qwen3-1.7b] [--batch 16,32] [--T 1024]
//                        [--steps 10] [--warmup 3] [--lora R]
//                        [--dtype bf16|fp32] [--recompute none|mlp|all] [--no-check] [--no-peak] [--json FILE]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/ops.h"
#include "models/gpt2.h"
#include "models/llama.h"
#include "optim/adamw.h"
#include "optim/grad_clip.h"

using namespace llmt;

namespace {

std::vector<float> to_host(const Tensor& t) {
    std::vector<float> v(static_cast<size_t>(t.numel()));
    kernels::copy(Tensor(v.data(), {t.numel()}), Tensor(t.data, {t.numel()}, t.dtype, t.device));
    return v;
}

// Max |a - b| / max |b| over one tensor.
double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
    double num = 0, den = 1e-30;
    for (size_t i = 0; i < a.size(); i++) {
        num = std::max(num, std::fabs(static_cast<double>(a[i]) - b[i]));
        den = std::max(den, std::fabs(static_cast<double>(b[i])));
    }
    return num / den;
}

// The benchmark's model (tiny: the small shape of the CPU check) on `device` in `dtype`.
std::unique_ptr<models::Model> make_bench_model(const std::string& arch, bool tiny, Device device, DType dtype,
                                                models::Recompute recompute, int lora_r = 0) {
    // --lora R: adapters of rank R, alpha 2R, on every linear layer (q, k, v, o, gate, up, down for LLaMA; the
    // peer's PEFT setup), the base frozen in the compute dtype.
    models::LoraSpec lora;
    lora.r = lora_r;
    lora.alpha = 2.0 * lora_r;
    lora.target_modules = {"all-linear"};
    if (arch == "llama" || arch == "llama3.1-8b") {
        const bool l8 = arch == "llama3.1-8b";
        models::LlamaConfig c;
        c.n_layer = tiny ? 2 : (l8 ? 32 : 16);
        c.n_head = tiny ? 4 : 32;
        c.n_kv_head = tiny ? 2 : 8;
        c.d_model = tiny ? 256 : (l8 ? 4096 : 2048);
        c.d_ff = tiny ? 704 : (l8 ? 14336 : 8192);
        c.block_size = tiny ? 64 : 2048;
        c.vocab_size = tiny ? 1000 : 128256;
        c.padded_vocab = tiny ? 1024 : 128256;
        c.tie_embeddings = !l8;
        c.rope_theta = 500000.0;
        c.rope_scaling = {"llama3", l8 ? 8.0 : 32.0, 1.0, 4.0, 8192};
        c.recompute = recompute;
        c.lora = lora;
        return std::make_unique<models::Llama>(c, device, dtype);
    }
    if (arch == "qwen2.5-1.5b" || arch == "qwen3-1.7b") {  // Qwen2.5 / Qwen3 on the LLaMA graph
        const bool q3 = arch == "qwen3-1.7b";
        models::LlamaConfig c;
        c.arch = q3 ? "qwen3" : "qwen2";
        c.n_layer = tiny ? 2 : 28;
        c.n_head = tiny ? 4 : (q3 ? 16 : 12);
        c.n_kv_head = 2;
        if (!tiny && q3) c.n_kv_head = 8;
        c.d_model = tiny ? 256 : (q3 ? 2048 : 1536);
        c.head_dim = tiny ? (q3 ? 48 : 64) : 128;  // the small Qwen3: head_dim != d_model / n_head, as Qwen3's may
        c.d_ff = tiny ? 704 : (q3 ? 6144 : 8960);
        c.block_size = tiny ? 64 : 2048;
        c.vocab_size = tiny ? 1000 : 151936;
        c.padded_vocab = tiny ? 1024 : 151936;
        c.tie_embeddings = true;
        c.norm_eps = 1e-6f;
        c.rope_theta = 1000000.0;
        c.qkv_bias = !q3;
        c.qk_norm = q3;
        c.recompute = recompute;
        c.lora = lora;
        return std::make_unique<models::Llama>(c, device, dtype);
    }
    models::Gpt2Config c;
    c.n_layer = tiny ? 2 : 12;
    c.n_head = tiny ? 4 : 12;
    c.d_model = tiny ? 128 : 768;
    c.d_ff = 4 * c.d_model;
    c.block_size = tiny ? 64 : 1024;
    c.vocab_size = tiny ? 1000 : 50257;
    c.padded_vocab = tiny ? 1024 : 50304;
    c.recompute = recompute;
    c.lora = lora;
    return std::make_unique<models::Gpt2>(c, device, dtype);
}

// The small model on CPU and CUDA from the same seed; returns false when they disagree beyond fp32 tolerance.
bool check_against_cpu(const std::string& arch, uint32_t seed) {
    const auto cpu_model = make_bench_model(arch, true, Device::kCpu, DType::kF32, models::Recompute::kNone);
    const auto gpu_model = make_bench_model(arch, true, Device::kCuda, DType::kF32, models::Recompute::kNone);
    models::Model& cpu = *cpu_model;
    models::Model& gpu = *gpu_model;
    cpu.init_random(seed);
    gpu.init_random(seed);
    const int B = 3, T = 61, V = cpu.dims().vocab_size;
    std::mt19937 rng(seed);
    std::vector<int32_t> in(B * T), tg(B * T);
    for (auto& x : in) x = static_cast<int32_t>(rng() % V);
    for (auto& x : tg) x = static_cast<int32_t>(rng() % V);
    tg[7] = -1;
    cpu.zero_grad();
    gpu.zero_grad();
    const float lc = cpu.forward(in.data(), tg.data(), B, T, true);
    const float lg = gpu.forward(in.data(), tg.data(), B, T, true);
    cpu.backward();
    gpu.backward();
    // fp32 on both sides: each op agrees to ~1e-6 (tests/kernels/cuda_ops_test); two layers of chained
    // ops and atomics in the GPU's reductions stay well under 1e-4.
    const double tol = 1e-4;
    double worst = std::fabs(lg - lc) / std::fabs(lc);
    std::printf("check: loss cpu %.6f cuda %.6f rel diff %.2e\n", lc, lg, worst);
    std::string worst_name = "loss";
    for (size_t i = 0; i < cpu.param_specs().size(); i++) {
        const double e = rel_err(to_host(gpu.grads().view(i)), to_host(cpu.grads().view(i)));
        if (e > worst) {
            worst = e;
            worst_name = cpu.param_specs()[i].name;
        }
    }
    std::printf("check: max rel err over the loss and %zu gradient tensors %.2e (%s), tol %.0e: %s\n",
                cpu.param_specs().size(), worst, worst_name.c_str(), tol, worst <= tol ? "ok" : "FAILED");
    return worst <= tol;
}

// Dense bf16 matmul rate (FLOP/s): out (n,n) = a (n,n) @ b (n,n)^T through kernels::matmul_forward, random
// normal inputs, median of 10 timed calls after 20 warm-up calls.
double bf16_matmul_rate(int n) {
    Arena a;
    a.add("x", {n, n}, DType::kBF16);
    a.add("w", {n, n}, DType::kBF16);
    a.add("o", {n, n}, DType::kBF16);
    a.add("f", {n, n});
    a.allocate(false, Device::kCuda);
    std::mt19937 rng(7);
    std::normal_distribution<float> d(0.f, 1.f);
    std::vector<float> h(static_cast<size_t>(n) * n);
    for (const char* name : {"x", "w"}) {
        for (auto& v : h) v = d(rng);
        kernels::copy(a.view("f"), Tensor(h.data(), {n, n}));
        kernels::convert(a.view(name), a.view("f"));
    }
    std::vector<double> t;
    for (int i = 0; i < 30; i++) {
        kernels::synchronize(Device::kCuda);
        const auto t0 = std::chrono::steady_clock::now();
        kernels::matmul_forward(a.view("o"), a.view("x"), a.view("w"), Tensor());
        kernels::synchronize(Device::kCuda);
        if (i >= 20) t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    return 2.0 * n * n * static_cast<double>(n) / t[t.size() / 2];
}

struct BenchResult {
    double tok_s = 0, ms = 0, mfu_989 = 0, mfu_measured = 0, flops_per_token = 0, gib = 0;
    float first_loss = 0, last_loss = 0;
};

BenchResult run_bench(const std::string& arch, models::Recompute recompute, int B, int T, int steps, int warmup,
                      DType dtype, double measured_peak, int lora_r) {
    kernels::synchronize(Device::kCuda);
    const auto before = kernels::device_memory_info(Device::kCuda);  // the CUDA context and cuBLASLt workspace
    const auto model = make_bench_model(arch, false, Device::kCuda, dtype, recompute, lora_r);
    models::Model& m = *model;
    const int V = m.dims().vocab_size;
    m.init_random(1337);
    std::mt19937 rng(42);
    std::vector<int32_t> in(static_cast<size_t>(B) * (T + 1));
    Arena& P = m.params();
    Arena& G = m.grads();
    // AdamW as the trainer builds it: one run per stretch of parameters with the same decay flag.
    std::vector<optim::ParamSlot> slots;
    for (size_t i = 0; i < m.param_specs().size(); ++i) {
        const auto& s = m.param_specs()[i];
        slots.push_back({s.name, Shape(s.shape.begin(), s.shape.end()), P.entry(i).offset / sizeof(float),
                         s.kind == models::ParamKind::kWeight});
    }
    const size_t n = P.nbytes() / sizeof(float);
    optim::AdamWConfig ac;
    ac.beta2 = 0.95f;
    ac.weight_decay = 0.1f;
    optim::AdamW opt(slots, n, ac, {}, Device::kCuda);
    float* params = static_cast<float*>(P.data());
    float* grads = static_cast<float*>(G.data());
    std::vector<double> times;
    BenchResult r;
    for (int s = 0; s < warmup + steps; s++) {
        for (auto& x : in) x = static_cast<int32_t>(rng() % V);  // random tokens, never zeros
        std::vector<int32_t> x(in.begin(), in.begin() + B * T), y(in.begin() + B, in.begin() + B + B * T);
        kernels::synchronize(Device::kCuda);
        const auto t0 = std::chrono::steady_clock::now();
        m.zero_grad();
        const float loss = m.forward(x.data(), y.data(), B, T, true);
        m.backward();
        const double norm = std::sqrt(optim::grad_sum_squares(grads, n, Device::kCuda));
        opt.step(params, grads, 6e-4f, optim::clip_coefficient(norm, 1.0), m.compute_params());
        kernels::synchronize(Device::kCuda);
        const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (s >= warmup) times.push_back(dt);
        if (s == 0) r.first_loss = loss;
        r.last_loss = loss;
        std::printf("  step %2d loss %.4f grad norm %.3f %.1f ms%s\n", s, loss, norm, dt * 1e3,
                    s < warmup ? " (warm-up)" : "");
    }
    std::sort(times.begin(), times.end());
    r.ms = times[times.size() / 2] * 1e3;
    r.tok_s = B * T / (r.ms * 1e-3);
    r.flops_per_token = m.train_flops_per_token(T);  // LoRA: 4N of the frozen base + 6N of the adapters
    r.mfu_989 = r.flops_per_token * r.tok_s / 989e12;
    r.mfu_measured = measured_peak > 0 ? r.flops_per_token * r.tok_s / measured_peak : 0;
    // Our arenas are allocated once (no caching allocator), so the memory in use after the steps, less
    // what was in use before the model, is the run's peak.
    const auto mem = kernels::device_memory_info(Device::kCuda);
    r.gib = static_cast<double>(before.free - mem.free) / 1073741824.0;
    std::printf("llmtrain %s cuda %s B=%d T=%d: median step %.2f ms (min %.2f, max %.2f), %.0f tokens/s, MFU %.1f%% "
                "of 989 TFLOP/s, %.1f%% of the measured %.0f TFLOP/s; loss %.3f->%.3f; GPU memory for the run %.2f "
                "GiB (%.1f GiB in use on the card)\n",
                arch.c_str(), dtype == DType::kBF16 ? "bf16" : "fp32", B, T, r.ms, times.front() * 1e3,
                times.back() * 1e3, r.tok_s, 100 * r.mfu_989, 100 * r.mfu_measured, measured_peak / 1e12, r.first_loss,
                r.last_loss, r.gib, (mem.total - mem.free) / 1073741824.0);
    std::fflush(stdout);
    return r;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<int> batches{16, 32};
    int T = 1024, steps = 10, warmup = 3;
    std::string arch = "gpt2";
    models::Recompute recompute = models::Recompute::kNone;
    bool check = true;
    int peak_n = 8192;  // --no-peak: 0 (profiling runs)
    DType dtype = DType::kBF16;
    std::string json_path;
    int lora_r = 0;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
        if (a == "--batch") {
            batches.clear();
            std::string v = next();
            for (size_t p = 0; p < v.size();) {
                size_t q = v.find(',', p);
                batches.push_back(std::atoi(v.substr(p, q - p).c_str()));
                p = q == std::string::npos ? v.size() : q + 1;
            }
        } else if (a == "--T") T = std::atoi(next().c_str());
        else if (a == "--arch") arch = next();
        else if (a == "--recompute") recompute = models::recompute_from_name(next());
        else if (a == "--steps") steps = std::atoi(next().c_str());
        else if (a == "--warmup") warmup = std::atoi(next().c_str());
        else if (a == "--dtype") dtype = next() == "fp32" ? DType::kF32 : DType::kBF16;
        else if (a == "--json") json_path = next();
        else if (a == "--lora") lora_r = std::atoi(next().c_str());
        else if (a == "--no-check") check = false;
        else if (a == "--no-peak") peak_n = 0;
        else {
            std::fprintf(stderr, "unknown argument %s\n", a.c_str());
            return 2;
        }
    }
    try {
        if (kernels::device_count(Device::kCuda) == 0) {
            std::printf("train_gpu_bench: no CUDA device: skipped\n");
            return 0;
        }
        if (arch != "gpt2" && arch != "llama" && arch != "llama3.1-8b" && arch != "qwen2.5-1.5b" &&
            arch != "qwen3-1.7b") {
            std::fprintf(stderr,
                         "train_gpu_bench: --arch must be gpt2, llama, llama3.1-8b, qwen2.5-1.5b or qwen3-1.7b\n");
            return 2;
        }
        if (check && !check_against_cpu(arch, std::random_device{}())) return 1;
        const double peak = peak_n > 0 ? bf16_matmul_rate(peak_n) : 0.0;
        if (peak_n > 0) std::printf("bf16 matmul 8192^3 (cuBLASLt, our path): %.1f TFLOP/s\n", peak / 1e12);
        std::FILE* js = json_path.empty() ? nullptr : std::fopen(json_path.c_str(), "w");
        if (js) std::fprintf(js, "{\"system\": \"llmtrain\", \"matmul_tflops\": %.3f}\n", peak / 1e12);
        for (int B : batches) {
            const BenchResult r = run_bench(arch, recompute, B, T, std::max(1, steps), warmup, dtype, peak, lora_r);
            if (js)
                std::fprintf(js,
                             "{\"system\": \"llmtrain\", \"arch\": \"%s\", \"lora_r\": %d, \"dtype\": \"%s\", \"B\": "
                             "%d, \"T\": %d, "
                             "\"ms_median\": %.4f, \"tok_s\": %.1f, \"flops_per_token\": %.1f, \"mfu_989\": %.5f, "
                             "\"mfu_measured\": %.5f, \"gib\": %.3f}\n",
                             arch.c_str(), lora_r, dtype == DType::kBF16 ? "bf16" : "fp32", B, T, r.ms, r.tok_s,
                             r.flops_per_token, r.mfu_989, r.mfu_measured, r.gib);
        }
        if (js) std::fclose(js);
    } catch (const Error& e) {
        std::fprintf(stderr, "train_gpu_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
