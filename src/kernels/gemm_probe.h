// A short measurement of the CPU's GEMM rate in each precision on a training step's own GEMM shapes:
// fp32 (cpu/gemm.h sgemm, what trainer.precision fp32 runs) against bf16 operands with fp32 accumulation
// (cpu/gemm_bf16.h, what bf16 runs: oneDNN on AMX or AVX512_BF16, else the emulation), each shape timed in
// both precisions one after the other. Time is the CPU time of the OpenMP team's threads (each read on its
// own thread) over the thread count, not the wall clock, as the MFU probe does (cpu/peak_flops.h): on a
// machine shared with other processes the wall time
// of a call is mostly waiting for a core (on the 2-core build machine at load 16, GPT-2 tiny's LM-head
// GEMMs read 26-44 GFLOP/s by the wall clock and 190-350 per CPU-second), while CPU time reads the cores. What
// trainer.precision: auto decides from (train/cpu_precision.h); `llmtrain version --json --gemm-probe` and
// bench/gemm print it too. The step's GEMM mix is described by weights, so the caller can time smaller
// stand-ins (fewer rows, fewer output features) for a step's large GEMMs.
// Thread safety: not thread-safe; run it outside OpenMP parallel regions, on the thread count in effect.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace llmt::kernels {

// C (M,N) = op(A) op(B) [+ C], row-major, as cpu/gemm.h.
struct GemmShape {
    bool trans_a = false, trans_b = false;
    int64_t M = 0, N = 0, K = 0;
    bool accumulate = false;  // beta 1: weight gradients add into their buffer
    double weight = 1;        // how many of these one training step runs (fractional for stand-ins)
    double flops() const { return 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K); }
    bool same_problem(const GemmShape& o) const {
        return trans_a == o.trans_a && trans_b == o.trans_b && M == o.M && N == o.N && K == o.K &&
               accumulate == o.accumulate;
    }
};

// Appends the GEMMs of a linear layer with an (out, in) weight over `rows` rows (cpu/matmul.h), each with
// `weight`: forward inp @ W^T, dinp = dout @ W, and unless frozen dW += dout^T @ inp. A shape already in
// the list gets the weight added instead.
void add_linear_gemms(std::vector<GemmShape>& shapes, int64_t rows, int64_t out, int64_t in, double weight,
                      bool weight_grad = true);

struct GemmProbe {
    double fp32_gflops = 0;  // the weighted FLOPs of the shapes / their weighted time (team CPU s / threads), GFLOP/s
    double bf16_gflops = 0;
    std::string bf16_path;   // cpu/bf16_isa.h: "amx" | "avx512_bf16" | "emulated"
    std::string bf16_how;    // cpu/gemm_bf16.h gemm_bf16_describe()
    int threads = 0;         // OpenMP threads in effect
    double seconds = 0;      // wall time the probe took
};

// Times each shape `reps` times per precision, fp32 and bf16 alternating, and keeps each one's least CPU
// time (the first pass also pays the one-time costs: page faults, oneDNN's JIT). Never reads or writes
// the caller's data.
GemmProbe probe_gemm_rates(const std::vector<GemmShape>& shapes, int reps = 2);

// The CPU GEMM paths a probe's figures belong to, for caches of them: the fp32 backend, the bf16 path
// (cpu/bf16_isa.h) and oneDNN's version and effective ISA: "onednn fp32, bf16 avx512_bf16, onednn 2.6.3
// (avx512_core_bf16)". Loads oneDNN where it is installed.
std::string cpu_gemm_libraries();

}  // namespace llmt::kernels
