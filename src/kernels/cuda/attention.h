// Causal multi-head self-attention on CUDA, fp32, FlashAttention-2's formulation (Dao 2023): the forward
// streams keys with an online softmax and saves only the log-sum-exp per row; the backward recomputes
// probabilities from it. No (T, T) matrix exists in memory. Same semantics as cpu/attention.h.
// Grouped-query heads as cpu/attention.h: query head h reads kv head h / (NH/KV).
// Legend: B batch, T time, C = NH*HS channels of q/out, NH query heads, KV kv heads, HS = C/NH <= 128,
// C3 = C + 2*KV*HS. Scale 1/sqrt(HS). dqkv = (overwritten).
// positions (B,T) device i32 (nullable): packed examples, query t attending keys t - positions[b,t] .. t
// (ops.h's contract, which the caller has checked on the host; the kernels rely on it to end the dk/dv loops).
// window (> 0, or 0 for none): query t attends only keys j > t - window as well (ops.h's sliding window); the
// kernels visit only the keys inside it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace llmt::kernels::cuda {

// out (B,T,C); lse (B,NH,T); qkv (B,T,C3) with q, k, v at channel offsets 0, C, C + KV*HS.
void attention_forward(float* out, float* lse, const float* qkv, int B, int T, int C, int NH, int KV,
                       cudaStream_t stream, const int32_t* positions = nullptr, int window = 0);
// dqkv (B,T,C3) =. dout (B,T,C); qkv (B,T,C3); out (B,T,C), lse (B,NH,T) from the forward.
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out, const float* lse,
                        int B, int T, int C, int NH, int KV, cudaStream_t stream,
                        const int32_t* positions = nullptr, int window = 0);
// KV-cache inference: out (B,Tq,C) for query rows t0..t0+Tq-1 of qkv (B,Tmax,C3). No backward.
void attention_forward_cached(float* out, const float* qkv, int B, int t0, int Tq, int Tmax, int C, int NH, int KV,
                              cudaStream_t stream, int window = 0);
// bf16 storage (fp32 arithmetic and lse): the simple fallback; ops.cpp prefers flash_attention.h's
// tensor-core kernels when they are built.
void attention_forward(__nv_bfloat16* out, float* lse, const __nv_bfloat16* qkv, int B, int T, int C, int NH, int KV,
                       cudaStream_t stream, const int32_t* positions = nullptr, int window = 0);
void attention_backward(__nv_bfloat16* dqkv, const __nv_bfloat16* dout, const __nv_bfloat16* qkv,
                        const __nv_bfloat16* out, const float* lse, int B, int T, int C, int NH, int KV,
                        cudaStream_t stream, const int32_t* positions = nullptr, int window = 0);

}  // namespace llmt::kernels::cuda
