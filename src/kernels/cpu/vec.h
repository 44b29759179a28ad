// Vectorised primitives over one contiguous row of floats, shared by the softmax-shaped kernels
// (classifier, attention): AVX-512 / AVX2 / scalar paths picked at run time (simd.h).
#pragma once

namespace llmt::kernels::cpu::vec {

// max_i x[i] (-inf for n == 0).
float row_max(const float* x, int n);
// e[i] = exp(x[i] - m) (e may alias x; e == nullptr: only the sum) and returns sum_i e[i], summed in
// fp32 within chunks of 1024 and fp64 across chunks.
float row_exp_sum(float* e, const float* x, int n, float m);
// x[i] *= s.
void row_scale(float* x, int n, float s);

}  // namespace llmt::kernels::cpu::vec
