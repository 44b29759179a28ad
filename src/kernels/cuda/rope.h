// Rotary position embedding on CUDA (Hugging Face's rotate-half convention), fp32 or bf16 qkv (fp32
// arithmetic; the table is always fp32); same semantics as cpu/rope.h. In place on the q and k heads.
// Legend: B batch, T time, NH query heads, KV kv heads, HS head size (even); qkv rows (NH + 2*KV)*HS wide.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace llmt::kernels::cuda {

// positions (B,T) device i32 (nullable): row (b,t) uses table row positions[b,t] instead of pos0 + t (packed
// examples; not read back, so the caller guarantees 0 <= positions < Tmax).
#define LLMT_ROPE_DECL(T)                                                                                    \
    /* qkv (B,T,C3): q and k heads of row t rotated by table row pos0 + t; rope (Tmax,HS) = [cos | sin]. */ \
    void rope_forward(T* qkv, const float* rope, int B, int T_, int NH, int KV, int HS, int pos0,             \
                      cudaStream_t stream, const int32_t* positions = nullptr);                             \
    /* dqkv (B,T,C3): dq and dk heads of row t rotated back (by -a) with table row t. */                     \
    void rope_backward(T* dqkv, const float* rope, int B, int T_, int NH, int KV, int HS, cudaStream_t stream, \
                       const int32_t* positions = nullptr);
LLMT_ROPE_DECL(float)
LLMT_ROPE_DECL(__nv_bfloat16)
#undef LLMT_ROPE_DECL

}  // namespace llmt::kernels::cuda
