// ReLU (torch.nn.functional.relu) and its backward from the output: dinp = dout where out > 0, else 0
// (torch's threshold_backward: the gradient at 0 is 0). Legend: N elements.
// Grad convention (src/kernels/README.md): dinp =.
#pragma once

#include <cstddef>

namespace llmt::kernels::cpu {

// out (N) = max(inp, 0); out may alias inp. NaN stays NaN (as torch).
void relu_forward(float* out, const float* inp, size_t N);
// dinp (N) = out > 0 ? dout : 0; dinp may alias dout.
void relu_backward(float* dinp, const float* dout, const float* out, size_t N);

}  // namespace llmt::kernels::cpu
