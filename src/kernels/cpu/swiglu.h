// SwiGLU (Shazeer 2020), the LLaMA MLP's gate: silu(gate) * up over the output of one fused gate_up
// projection. Legend: N rows (B*T), F the MLP's hidden width (intermediate_size); silu(x) = x sigmoid(x).
// Grad convention (src/kernels/README.md): dinp = (activation grad).
#pragma once

#include <cstddef>

namespace llmt::kernels::cpu {

// out (N,F) = silu(gate) * up, with inp (N,2F) holding gate in columns [0,F) and up in [F,2F).
void swiglu_forward(float* out, const float* inp, size_t N, int F);

// dinp (N,2F) =: d gate = dout * up * silu'(gate) in [0,F), d up = dout * silu(gate) in [F,2F).
// dout (N,F); inp (N,2F) from the forward.
void swiglu_backward(float* dinp, const float* dout, const float* inp, size_t N, int F);

}  // namespace llmt::kernels::cpu
