// Per-head RMSNorm of the query and key heads inside a fused q|k|v row on CUDA (Qwen3's q_norm and k_norm),
// fp32 or bf16 storage with fp32 statistics and arithmetic; same semantics as cpu/head_rmsnorm.h. Legend: N rows
// (B*T), NH query heads, KV key/value heads, HS head size (even, <= 256), C3 = (NH + 2*KV) * HS.
// dq_weight, dk_weight += (fp32; summed per block of rows, the blocks' sums added in block order: the same bits
// on every run). Calls on one device share the backward's scratch buffer: run them on one stream (stream()).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace llmt::kernels::cuda {

#define LLMT_HEAD_RMSNORM_DECL(T)                                                                                  \
    /* out (N,C3): each q/k head * rstd * its weight, values copied; rstd (N,NH+KV). out does not alias inp. */   \
    void head_rmsnorm_forward(T* out, float* rstd, const T* inp, const T* q_weight, const T* k_weight, float eps, \
                              long N, int NH, int KV, int HS, cudaStream_t stream);                               \
    /* dinp (N,C3) = (may alias dout); dq_weight, dk_weight (HS) +=. */                                           \
    void head_rmsnorm_backward(T* dinp, float* dq_weight, float* dk_weight, const T* dout, const T* inp,         \
                               const T* q_weight, const T* k_weight, const float* rstd, long N, int NH, int KV,   \
                               int HS, cudaStream_t stream);
LLMT_HEAD_RMSNORM_DECL(float)
LLMT_HEAD_RMSNORM_DECL(__nv_bfloat16)
#undef LLMT_HEAD_RMSNORM_DECL

}  // namespace llmt::kernels::cuda
