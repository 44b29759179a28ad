// Kernel lab (llm.c's dev/cuda) for the RMSNorm backward, timed by bench/llama_ops_gpu beside src's:
//  - version 1, which src/kernels/cuda/rmsnorm.cu replaced (748e3fc): one warp per row, the row's 16-byte groups
//    and the warp's dweight partials in registers, at most 264 blocks, dweight through shared then global fp32
//    atomics (its last bits vary between runs); 31-39% of copy bandwidth on an H100 at Llama-3.2-1B's shape
//    (docs/benchmarks.md). Vectorised widths only: C a multiple of 16 bytes, C <= 32 * 8 groups of 16 bytes.
//  - src's row kernels (cuda/rmsnorm_backward_kernels.cuh) at other rows per step and blocks per SM than src's.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace llmt::lab {

// Whether rmsnorm_backward_v1 takes this width and these pointers (16-byte multiple, aligned, C small enough).
bool rmsnorm_backward_v1_supports(int C, int elem_bytes, const void* dinp, const void* dout, const void* inp,
                                  const void* weight);

// The contract of llmt::kernels::cuda::rmsnorm_backward (dinp +=, dweight += in fp32) for the widths above;
// throws InternalError for any other.
void rmsnorm_backward_v1(__nv_bfloat16* dinp, float* dweight, const __nv_bfloat16* dout, const __nv_bfloat16* inp,
                         const __nv_bfloat16* weight, const float* rstd, int B, int T, int C, cudaStream_t s);
void rmsnorm_backward_v1(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                         const float* rstd, int B, int T, int C, cudaStream_t s);

// src's backward (rmsnorm_backward's contract) on one 16-byte group of bf16 per thread (C a multiple of 8,
// C <= 4096, 16-byte aligned pointers; else InternalError), with rows_per_step rows per iteration (1, 2, 4 =
// src's, 8) and at most max_blocks_per_sm blocks per SM (0: as many as fit, src's). with_dweight = false
// launches only the row kernel (dweight is then left unchanged: for timing the second kernel's share).
void rmsnorm_backward_rows(__nv_bfloat16* dinp, float* dweight, const __nv_bfloat16* dout, const __nv_bfloat16* inp,
                           const __nv_bfloat16* weight, const float* rstd, int B, int T, int C, int rows_per_step,
                           int max_blocks_per_sm, bool with_dweight, cudaStream_t s);

}  // namespace llmt::lab
