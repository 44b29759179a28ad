// Reductions over flat gradient buffers: the global gradient norm for clipping
// (torch.nn.utils.clip_grad_norm_ semantics) and an in-place scale. Legend: N elements.
#pragma once

#include <cstddef>

namespace llmt::kernels::cpu {

// sum_i x[i]^2 accumulated in fp64 (the global norm is sqrt of the sum over all gradient tensors).
double sum_squares(const float* x, size_t N);

// x (N) *= s, in place.
void scale_inplace(float* x, size_t N, float s);

}  // namespace llmt::kernels::cpu
