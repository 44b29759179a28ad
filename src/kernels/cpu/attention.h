// Causal multi-head self-attention over a fused qkv projection, forward and backward, in the row-wise
// "online softmax" formulation of FlashAttention (Dao et al. 2022): the forward keeps one row of
// scores per thread (T floats) and saves only the log-sum-exp per row; the backward recomputes the
// probabilities from it. Memory is O(B*NH*T) instead of llm.c's two B*NH*T*T buffers.
// Legend: B batch, T time, C channels, NH heads, HS = C/NH head size. Scale 1/sqrt(HS).
// Grad convention (src/kernels/README.md): dqkv = (activation grad, overwritten).
#pragma once

namespace llmt::kernels::cpu {

// out (B,T,C): per head h, softmax(q k^T / sqrt(HS) + causal mask) v, heads concatenated on C.
// lse (B,NH,T) saved for backward: log sum_j exp(score_tj) over j <= t.
// qkv (B,T,3C): q, k, v at channel offsets 0, C, 2C; head h uses channels [h*HS, (h+1)*HS) of each.
void attention_forward(float* out, float* lse, const float* qkv, int B, int T, int C, int NH);

// dqkv (B,T,3C) = grads of q, k, v. dout (B,T,C); qkv (B,T,3C); out (B,T,C), lse (B,NH,T) from forward.
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, int B, int T, int C, int NH);

// Inference with a KV cache: qkv (B,Tmax,3C) holds q/k/v of positions 0..t0+Tq-1 (rows beyond are not
// read); out (B,Tq,C) = attention of the query rows t0..t0+Tq-1, each against keys 0..its position.
// Equal to rows t0.. of attention_forward over the first t0+Tq positions. No backward.
void attention_forward_cached(float* out, const float* qkv, int B, int t0, int Tq, int Tmax, int C, int NH);

}  // namespace llmt::kernels::cpu
