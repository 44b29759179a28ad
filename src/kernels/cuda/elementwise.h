// Element-wise ops on CUDA, same semantics as cpu/gelu.h, cpu/residual.h, cpu/dropout.h (the dropout mask
// is the same splitmix64 counter hash, so CPU and GPU drop the same elements) and cpu/reduce.h's scale.
// Legend: N elements. Grad rules: gelu/dropout dinp =; residual dinp1, dinp2 += (residual stream).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace llmt::kernels::cuda {

void gelu_forward(float* out, const float* inp, size_t N, cudaStream_t stream);
void gelu_backward(float* dinp, const float* inp, const float* dout, size_t N, cudaStream_t stream);
void residual_forward(float* out, const float* inp1, const float* inp2, size_t N, cudaStream_t stream);
void residual_backward(float* dinp1, float* dinp2, const float* dout, size_t N, cudaStream_t stream);
// out (N) = keep_i ? inp_i / (1 - p) : 0 with keep_i = splitmix64(splitmix64(seed) + i) >> 40 >= p * 2^24.
void dropout_forward(float* out, const float* inp, float p, uint64_t seed, size_t N, cudaStream_t stream);
void dropout_backward(float* dinp, const float* dout, float p, uint64_t seed, size_t N, cudaStream_t stream);
void scale_inplace(float* x, size_t N, float s, cudaStream_t stream);

}  // namespace llmt::kernels::cuda
