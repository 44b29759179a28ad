// Token + position embedding (GPT-2's wte/wpe), forward and backward; llm.c train_gpt2.c encoder_*.
// Legend: B batch, T time, C channels, V vocab rows of wte (Vp when padded). Parameter grads use +=.
#pragma once

#include <cstdint>

namespace llmt::kernels::cpu {

// out (B,T,C) = wte[inp[b,t], :] + wpe[t, :] (+ nothing when wpe is null: LLaMA)
// inp (B,T) token ids in [0, rows of wte); wte (V,C); wpe (>=T, C)
void encoder_forward(float* out, const int32_t* inp, const float* wte, const float* wpe, int B, int T,
                     int C);

// dwte (V,C) += scatter of dout by token id; dwpe (>=T, C) += sum over b of dout[b,t,:] (unless null).
// dout (B,T,C); inp (B,T). Parameter grads: +=.
void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B, int T,
                      int C);

}  // namespace llmt::kernels::cpu
