// Rotary position embedding (Su et al. 2021) in Hugging Face's rotate-half convention (transformers
// modeling_llama.py apply_rotary_pos_emb / rotate_half): a head vector x of HS channels, half = HS/2, is
// rotated pairwise as (x[i], x[i+half]) by the angle a_i = pos * inv_freq[i], i < half:
//   y[i] = x[i] cos a_i - x[i+half] sin a_i,   y[i+half] = x[i+half] cos a_i + x[i] sin a_i.
// Applied in place to the q and k heads of the fused qkv (attention.h's grouped-query layout); v is not
// touched. The model computes the table; these ops only apply it.
// Legend: B batch, T time, NH query heads, KV key/value heads, HS head size (even), C3 = (NH + 2*KV)*HS,
// Tmax the table's positions. Grad convention: dqkv's dq, dk rotated back in place (the activation grad).
#pragma once

#include <cstdint>

namespace llmt::kernels::cpu {

// qkv (B,T,C3) in place: the NH q heads and KV k heads of row t rotated with table row pos0 + t.
// rope (Tmax,HS) f32: row p holds cos(a_0..a_{half-1}) then sin(a_0..a_{half-1}) for position p;
// pos0 + T <= Tmax (pos0 > 0: the rows of a KV-cache decode step). positions (B,T) (nullable): row (b,t)
// uses table row positions[b,t] instead (packed examples, ops.h's contract; each < Tmax).
void rope_forward(float* qkv, const float* rope, int B, int T, int NH, int KV, int HS, int pos0,
                  const int32_t* positions = nullptr);

// dqkv (B,T,C3) in place: the transpose of the forward's rotation (by -a_i) on the dq and dk heads of row t
// (table row t, or positions[b,t]); dv untouched. rope (>=T,HS) as above.
void rope_backward(float* dqkv, const float* rope, int B, int T, int NH, int KV, int HS,
                   const int32_t* positions = nullptr);

}  // namespace llmt::kernels::cpu
