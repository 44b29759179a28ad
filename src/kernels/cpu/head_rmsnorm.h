// Per-head RMSNorm of the query and key heads inside a fused q|k|v row (Qwen3's q_norm and k_norm: Hugging
// Face's Qwen3RMSNorm over head_dim, applied to each head before RoPE). Statistics in fp32 as in rmsnorm.h;
// the value heads pass through unchanged. Legend: N rows (B*T), NH query heads, KV key/value heads, HS head
// size, C3 = (NH + 2*KV) * HS the row width. Grad convention (src/kernels/README.md): dq_weight, dk_weight +=.
#pragma once

#include <cstdint>

namespace llmt::kernels::cpu {

// out (N,C3): query head h = inp's head h * rstd * q_weight, key head g likewise with k_weight, values
// copied; rstd (N, NH+KV) = 1 / sqrt(mean(head^2) + eps) per q and k head, saved for backward. inp (N,C3);
// q_weight, k_weight (HS). out must not alias inp.
void head_rmsnorm_forward(float* out, float* rstd, const float* inp, const float* q_weight, const float* k_weight,
                          float eps, int64_t N, int NH, int KV, int HS);

// dinp (N,C3) =: the q and k heads' gradients through the norm, the values' copied from dout; dinp may
// alias dout (the backward runs in place on the attention's gradient). dq_weight, dk_weight (HS) +=, summed
// over rows in a fixed order (the same bits whatever the thread count). dout, inp (N,C3); rstd (N, NH+KV).
void head_rmsnorm_backward(float* dinp, float* dq_weight, float* dk_weight, const float* dout, const float* inp,
                           const float* q_weight, const float* k_weight, const float* rstd, int64_t N, int NH, int KV,
                           int HS);

}  // namespace llmt::kernels::cpu
