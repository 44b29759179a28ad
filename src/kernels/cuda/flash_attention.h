// Causal multi-head self-attention in bf16 on tensor cores (mma.sync m16n8k16, fp32 accumulators), after
// FlashAttention-2 (Dao 2023): the forward streams K/V tiles through shared memory with an online softmax
// and saves the natural-log log-sum-exp per row; the backward recomputes P from it, one K/V tile per block.
// Same semantics as cpu/attention.h (scale 1/sqrt(HS), HS = C/NH in {64, 128}; grouped-query heads, query head h
// reading kv head h / (NH/KV)); no (T, T) matrix in memory.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace llmt::kernels::cuda {

// out (B,T,C) bf16; lse (B,NH,T) fp32; qkv (B,T,C3) bf16, C3 = C + 2*KV*HS, with q, k, v at channel offsets
// 0, C, C + KV*HS and head h at channels [h*HS, (h+1)*HS) of each. Throws InternalError for HS not in {64, 128}
// or bad shapes (ops.h checks them first). positions (B,T) device i32 (optional): packed examples, query t
// attending keys t - positions[b,t] .. t (ops.h's contract, checked by the caller on the host: the kernels choose
// the tiles they visit from it). window (> 0, or 0 for none): query t attends only keys j > t - window as well
// (ops.h's sliding window); key tiles wholly outside every row's window are never visited.
void flash_attention_forward(__nv_bfloat16* out, float* lse, const __nv_bfloat16* qkv, int B, int T, int C, int NH,
                             int KV, cudaStream_t s, const int32_t* positions = nullptr, int window = 0);

// dqkv (B,T,C3) bf16, overwritten (dk/dv summed over each kv head's query heads). dout (B,T,C); qkv; out (B,T,C)
// and lse (B,NH,T) from the forward. Scratch (fp32 dq accumulator, row-wise D = sum(dout * out), the fp32 dK/dV
// accumulator when a kv head's query heads are split over blocks) lives in a grow-only per-device cache.
// dqkv_colsum (C3 fp32, optional) += the column sums of dqkv (the qkv bias gradient), taken from the fp32
// values before the bf16 rounding: dK/dV in the kernel's epilogue, dQ in its conversion pass. positions as in
// the forward. window: as the forward's.
void flash_attention_backward(__nv_bfloat16* dqkv, const __nv_bfloat16* dout, const __nv_bfloat16* qkv,
                              const __nv_bfloat16* out, const float* lse, int B, int T, int C, int NH, int KV,
                              cudaStream_t s, float* dqkv_colsum = nullptr, const int32_t* positions = nullptr,
                              int window = 0);

}  // namespace llmt::kernels::cuda
