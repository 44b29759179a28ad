// Global-norm gradient clipping with torch.nn.utils.clip_grad_norm_ semantics (norm_type 2):
// total = ||all grads||_2, coef = max_norm / (total + 1e-6), clamped to at most 1; grads *= coef.
// The sum of squares is accumulated in fp64 (PyTorch uses fp32 per tensor), see kernels/cpu/reduce.h.
#pragma once

#include <cstddef>

#include "core/tensor.h"

namespace llmt::optim {

// Sum of squares of grads[0, n) in fp64: the per-rank part of the global norm (a distributed caller
// all-reduces it before global_norm_from_sumsq). `device`: where grads lives (a GPU sum synchronises).
double grad_sum_squares(const float* grads, std::size_t n, Device device = Device::kCpu);

// sqrt of a (reduced) sum of squares.
double global_norm_from_sumsq(double sumsq);

// The factor to multiply grads by: min(1, max_norm / (total_norm + 1e-6)). Returns 1 when
// max_norm <= 0 (clipping disabled) or when total_norm is not finite: unlike PyTorch (which then
// turns every grad into NaN), the caller is expected to check the norm and skip the step.
float clip_coefficient(double total_norm, double max_norm);

// Convenience for one process: computes the norm of grads[0, n), scales grads in place when the
// coefficient is below 1, and returns the norm before clipping (what training logs report).
double clip_grad_norm(float* grads, std::size_t n, double max_norm);

}  // namespace llmt::optim
