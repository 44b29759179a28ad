// Residual add, forward and backward. Legend: N = any element count (B*T*C in GPT-2).
// Grad convention (src/kernels/README.md): this op sits on the residual stream, so its backward
// accumulates (+=) into both input grads, which other branches also write.
#pragma once

#include <cstddef>

namespace llmt::kernels::cpu {

// out (N) = inp1 (N) + inp2 (N). out may alias either input.
void residual_forward(float* out, const float* inp1, const float* inp2, size_t N);

// dinp1 (N) += dout; dinp2 (N) += dout. dout (N).
void residual_backward(float* dinp1, float* dinp2, const float* dout, size_t N);

}  // namespace llmt::kernels::cpu
