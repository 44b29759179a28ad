// bf16 GEMM with fp32 accumulation on the CPU (trainer.precision: bf16 with run.device: cpu): fp32 operands
// are rounded to bf16 (round to nearest even, as torch's .to(torch.bfloat16) and CPU autocast do), multiplied
// by oneDNN's bf16 matmul (brgemm on AVX512_BF16: vdpbf16ps, two bf16 products per fp32 lane per FMA), and
// the fp32 result written or accumulated. bench/gemm compares it with sgemm; docs/benchmarks.md has the
// figures that chose oneDNN's kernels over our own.
// Where the CPU has no AVX512_BF16 (or LLMTRAIN_CPU_ISA narrows below avx512), the same numerics are emulated:
// the operands are rounded to bf16 values held in fp32 and multiplied by sgemm (a product of two bf16 values is
// exact in fp32, so only the summation order differs). It is as fast as fp32, not faster: the run still uses
// bf16 numerics, as torch's CPU autocast does on such CPUs, and the trainer's log says which path runs.
// Thread safety: all functions are thread-safe; gemm_bf16 must not be called inside an OpenMP parallel region.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace llmt::kernels::cpu {

// True when this CPU has AVX512_BF16, LLMTRAIN_CPU_ISA allows avx512 and oneDNN is compiled in and loads:
// gemm_bf16 then runs natively, else it emulates. Never throws.
bool gemm_bf16_native();
// Why it emulates, for the log ("this CPU has no AVX512_BF16 (vdpbf16ps)"); empty when native.
std::string gemm_bf16_emulation_reason();
// One line for logs and the bench: "oneDNN brg:avx512_core_bf16" or "emulated in fp32 sgemm: <reason>".
std::string gemm_bf16_describe();

// C (M,N) = op(A) @ op(B) + beta * C with op(A), op(B) rounded to bf16 and products summed in fp32; layouts
// as sgemm (gemm.h): row-major, A (M,K) or (K,M) when trans_a, B (K,N) or (N,K) when trans_b. beta is 0
// (C is overwritten, not read) or 1 (accumulate).
void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// The same on a given path (tests and bench): native throws DeviceError when !gemm_bf16_native().
void gemm_bf16_with(bool native, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A,
                    int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// dst[i] = bf16 bit pattern of src[i], round to nearest even (core/bf16.h), for rows x cols with leading
// dimension ld into a packed rows x cols buffer. AVX512_BF16 (vcvtne2ps2bf16) where present.
void round_to_bf16(const float* src, int64_t rows, int64_t cols, int64_t ld, uint16_t* dst);

}  // namespace llmt::kernels::cpu
