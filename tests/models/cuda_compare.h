// One training step of a model on CUDA against the same model on the CPU from the same initialisation
// and tokens (models/model.h: the same model code, kernels/ops.h dispatching on the arenas' device), for
// gpt2_cuda_test and llama_cuda_test. fp32: the loss and every gradient agree to 1e-4; bf16 mixed
// precision: the loss to 1e-2 and the gradient's direction and norm. Label `gpu` tests only.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "models/model.h"
#include "support/compare.h"
#include "support/error_measures.h"

namespace llmt::models::testing {

inline std::vector<float> to_host(const Tensor& t) {
    std::vector<float> v(static_cast<size_t>(t.numel()));
    kernels::copy(Tensor(v.data(), {t.numel()}), Tensor(t.data, {t.numel()}, t.dtype, t.device));
    return v;
}

using support::rel_err;

// Random ids and targets (one ignored) for B x T, from `seed`; forward + backward on both models.
struct StepLosses {
    float cpu = 0, gpu = 0;
};
inline StepLosses run_step(Model& cpu, Model& gpu, uint32_t seed, int B, int T) {
    const int V = cpu.dims().vocab_size;
    std::mt19937 rng(seed);
    std::vector<int32_t> in(static_cast<size_t>(B * T)), tg(in.size());
    for (auto& x : in) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(V));
    for (auto& x : tg) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(V));
    tg[7] = -1;  // an ignored position
    cpu.zero_grad();
    gpu.zero_grad();
    StepLosses l{cpu.forward(in.data(), tg.data(), B, T, true), gpu.forward(in.data(), tg.data(), B, T, true)};
    cpu.backward();
    gpu.backward();
    return l;
}

// fp32 on both sides: each op agrees to ~1e-6 (tests/kernels/cuda_ops_test); two layers of chained ops, and
// atomics in the GPU's reductions, stay far below 1e-4 (a bf16 or TF32 slip would not).
inline void expect_fp32_step_matches(Model& cpu, Model& gpu, uint32_t seed, int B, int T, const char* tag) {
    const StepLosses l = run_step(cpu, gpu, seed, B, T);
    constexpr double kTol = 1e-4;
    std::printf("[%s] loss cpu %.6f cuda %.6f rel diff %.2e\n", tag, l.cpu, l.gpu, std::fabs(l.gpu - l.cpu) / l.cpu);
    EXPECT_LE(std::fabs(l.gpu - l.cpu) / l.cpu, kTol);
    double worst = 0;
    for (size_t i = 0; i < cpu.param_specs().size(); i++) {
        const double e = rel_err(to_host(gpu.grads().view(i)), to_host(cpu.grads().view(i)));
        worst = std::max(worst, e);
        EXPECT_LE(e, kTol) << "grad of " << cpu.param_specs()[i].name;
    }
    std::printf("[%s] max rel err over %zu gradient tensors %.2e (tol %.0e)\n", tag, cpu.param_specs().size(), worst,
                kTol);
}

// bf16 rounds every stored activation to 8 significant bits (2^-9 relative); the loss is a mean of fp32
// cross-entropies over bf16 logits: ~1e-3 relative expected, 1e-2 allowed. Gradients chain ~20 bf16
// roundings through two layers and the classifier: each tensor's max error relative to its max |value|
// stays at a few 1e-2 (0.15 allowed per tensor: the smallest gradients are sums of cancelling terms); the
// whole gradient's direction must agree (cosine >= 0.995) and its norm within 2%. A wrong kernel gives
// cosine ~0 or errors ~1.
inline void expect_bf16_step_tracks(Model& cpu, Model& gpu, uint32_t seed, int B, int T, const char* tag) {
    const StepLosses l = run_step(cpu, gpu, seed, B, T);
    std::printf("[%s] loss cpu %.6f cuda-bf16 %.6f rel diff %.2e\n", tag, l.cpu, l.gpu,
                std::fabs(l.gpu - l.cpu) / l.cpu);
    EXPECT_LE(std::fabs(l.gpu - l.cpu) / l.cpu, 1e-2);
    double dot = 0, nc = 0, ng = 0, worst = 0;
    std::string worst_name;
    for (size_t i = 0; i < cpu.param_specs().size(); i++) {
        const auto a = to_host(gpu.grads().view(i)), b = to_host(cpu.grads().view(i));
        for (size_t k = 0; k < a.size(); k++) {
            dot += static_cast<double>(a[k]) * b[k];
            ng += static_cast<double>(a[k]) * a[k];
            nc += static_cast<double>(b[k]) * b[k];
        }
        const double e = rel_err(a, b);
        if (e > worst) {
            worst = e;
            worst_name = cpu.param_specs()[i].name;
        }
        EXPECT_LE(e, 0.15) << "grad of " << cpu.param_specs()[i].name;
    }
    const double cosine = dot / std::sqrt(nc * ng);
    std::printf("[%s] gradients: cosine %.6f, norm cuda/cpu %.4f, worst tensor rel err %.3e (%s)\n", tag, cosine,
                std::sqrt(ng / nc), worst, worst_name.c_str());
    EXPECT_GE(cosine, 0.995);
    EXPECT_NEAR(std::sqrt(ng / nc), 1.0, 0.02);
}

}  // namespace llmt::models::testing
