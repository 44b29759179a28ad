// GELU with the tanh approximation (GPT-2; torch.nn.functional.gelu(approximate="tanh")), forward and
// backward. Legend: N = any element count (B*T*4C in GPT-2's MLP).
// Grad convention (src/kernels/README.md): dinp = (activation grad); dinp may alias dout.
#pragma once

#include <cstddef>

namespace llmt::kernels::cpu {

// out (N) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); inp (N). out may alias inp.
void gelu_forward(float* out, const float* inp, size_t N);

// dinp (N) = gelu'(inp) * dout; dout (N), inp (N). dinp may alias dout.
void gelu_backward(float* dinp, const float* inp, const float* dout, size_t N);

}  // namespace llmt::kernels::cpu
