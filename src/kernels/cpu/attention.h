// Causal multi-head self-attention over a fused qkv projection, forward and backward, in the row-wise
// "online softmax" formulation of FlashAttention (Dao et al. 2022): the forward keeps one row of
// scores per thread (T floats) and saves only the log-sum-exp per row; the backward recomputes the
// probabilities from it. Memory is O(B*NH*T) instead of llm.c's two B*NH*T*T buffers.
// Grouped-query attention (GQA, Ainslie et al. 2023; Hugging Face's repeat_kv): KV key/value heads serve the
// NH query heads, query head h reading kv head h / (NH / KV); KV == NH is multi-head attention (GPT-2).
// Legend: B batch, T time, C = NH*HS channels of q and of out, NH query heads, KV key/value heads (NH % KV == 0),
// HS = C/NH head size, C3 = C + 2*KV*HS the width of a qkv row. Scale 1/sqrt(HS).
// Grad convention (src/kernels/README.md): dqkv = (activation grad, overwritten); dk/dv of a kv head are the
// sums over the NH/KV query heads that share it.
#pragma once

#include <cstdint>

namespace llmt::kernels::cpu {

// out (B,T,C): per query head h, softmax(q_h k_g^T / sqrt(HS) + causal mask) v_g with g = h / (NH/KV), heads
// concatenated on C. lse (B,NH,T) saved for backward: log sum_j exp(score_tj) over j <= t.
// qkv (B,T,C3): q at channel 0 (NH*HS wide), k at C (KV*HS wide), v at C + KV*HS (KV*HS wide); head h of q
// uses channels [h*HS, (h+1)*HS), kv head g channels [g*HS, (g+1)*HS) of k and of v.
// positions (B,T) (nullable: plain causal attention): packed examples; query t of row b attends keys
// t - positions[b,t] .. t only (0 <= positions[b,t] <= t; ops.h states and checks the full contract). The
// sums of lse and the softmax run over those keys; without positions every path runs plain causal attention
// (no position code on the way).
// window (> 0: Mistral's sliding window; 0: none): query t attends keys j with t - window < j <= t only
// (transformers' rule), on top of the positions' bound.
void attention_forward(float* out, float* lse, const float* qkv, int B, int T, int C, int NH, int KV,
                       const int32_t* positions = nullptr, int window = 0);

// dqkv (B,T,C3) = grads of q, k, v (dk, dv summed over the query heads of each kv head). dout (B,T,C);
// qkv (B,T,C3); out (B,T,C), lse (B,NH,T) from forward; positions as in the forward.
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, int B, int T, int C, int NH, int KV, const int32_t* positions = nullptr,
                        int window = 0);

// Inference with a KV cache: qkv (B,Tmax,C3) holds q/k/v of positions 0..t0+Tq-1 (rows beyond are not
// read); out (B,Tq,C) = attention of the query rows t0..t0+Tq-1, each against keys 0..its position.
// Equal to rows t0.. of attention_forward over the first t0+Tq positions (with the same window). No backward.
void attention_forward_cached(float* out, const float* qkv, int B, int t0, int Tq, int Tmax, int C, int NH, int KV,
                              int window = 0);

}  // namespace llmt::kernels::cpu
