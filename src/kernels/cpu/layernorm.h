// LayerNorm over the last dim (biased variance, as torch.nn.LayerNorm; eps is model.norm_eps, GPT-2's
// 1e-5), forward and backward; llm.c train_gpt2.c layernorm_*. Legend: B batch, T time, C channels.
// Grad convention (src/kernels/README.md): parameter grads +=; dinp += because a LayerNorm's input is
// the residual stream, whose gradient already holds the skip connection's share.
#pragma once

namespace llmt::kernels::cpu {

// out (B,T,C) = (inp - mean) * rstd * weight + bias with rstd = 1 / sqrt(var + eps); saves mean (B,T),
// rstd (B,T) for backward. inp (B,T,C); weight, bias (C); eps > 0.
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, float eps, int B, int T, int C);

// dinp (B,T,C) +=; dweight, dbias (C) +=.
// dout (B,T,C); inp (B,T,C); weight (C); mean, rstd (B,T) from the forward. eps enters only through
// the saved rstd, so the backward takes no eps of its own (one value, no way for the two to disagree).
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int B, int T, int C);

}  // namespace llmt::kernels::cpu
