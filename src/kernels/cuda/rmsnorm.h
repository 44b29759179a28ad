// RMSNorm over the last dim on CUDA, fp32 or bf16 storage (fp32 statistics and arithmetic); same semantics as
// cpu/rmsnorm.h. Legend: B batch, T time, C channels. dinp += (residual stream); dweight += (fp32; the same bits
// on every run on one GPU model, except for rows of more than 2048 16-byte groups or C > 2048 in one-element
// groups: atomics).
// Calls on one device share the backward's scratch buffer: run them on one stream (stream()), as the ops do.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace llmt::kernels::cuda {

#define LLMT_RMSNORM_DECL(T)                                                                                       \
    /* out (B,T,C) = inp * rstd * weight; rstd (B,T) = 1 / sqrt(mean(inp^2) + eps). */                            \
    void rmsnorm_forward(T* out, float* rstd, const T* inp, const T* weight, float eps, int B, int T_, int C,      \
                         cudaStream_t stream);                                                                     \
    /* dinp (B,T,C) +=; dweight (C) +=. */                                                                        \
    void rmsnorm_backward(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight, const float* rstd, \
                          int B, int T_, int C, cudaStream_t stream);                                              \
    /* residual_out = inp1 + inp2 (stored rounded), then rmsnorm_forward of the stored residual_out. */            \
    void residual_rmsnorm_forward(T* residual_out, T* out, float* rstd, const T* inp1, const T* inp2,              \
                                  const T* weight, float eps, int B, int T_, int C, cudaStream_t stream);
LLMT_RMSNORM_DECL(float)
LLMT_RMSNORM_DECL(__nv_bfloat16)
#undef LLMT_RMSNORM_DECL

}  // namespace llmt::kernels::cuda
