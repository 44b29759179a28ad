// RMSNorm over the last dim (Zhang & Sennrich 2019; Hugging Face's LlamaRMSNorm): statistics in fp32, the
// normalised row times the weight, no mean subtraction and no bias. Forward and backward, plus the residual
// add fused in front of it (the LLaMA block's "h = x + attn(x); rmsnorm(h)"). Legend: B batch, T time,
// C channels. Grad convention (src/kernels/README.md): dweight +=; dinp += because an RMSNorm's input is the
// residual stream, whose gradient already holds the skip connection's share.
#pragma once

namespace llmt::kernels::cpu {

// out (B,T,C) = inp * rstd * weight with rstd (B,T) = 1 / sqrt(mean(inp^2) + eps), saved for backward.
// inp (B,T,C); weight (C); eps > 0 (model.norm_eps; LLaMA's rms_norm_eps, 1e-5 or 1e-6).
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, float eps, int B, int T, int C);

// dinp (B,T,C) +=; dweight (C) +=. dout, inp (B,T,C); weight (C); rstd (B,T) from the forward (which carries
// eps, so the backward takes none).
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, int B, int T, int C);

// residual_out (B,T,C) = inp1 + inp2, then out, rstd = rmsnorm_forward(residual_out): the same values as the
// two ops in turn. residual_out may alias inp1 or inp2.
void residual_rmsnorm_forward(float* residual_out, float* out, float* rstd, const float* inp1, const float* inp2,
                              const float* weight, float eps, int B, int T, int C);

}  // namespace llmt::kernels::cpu
