// Element-wise ops on CUDA, same semantics as cpu/gelu.h, cpu/residual.h, cpu/dropout.h (the dropout mask
// is the same splitmix64 counter hash, so CPU and GPU drop the same elements) and cpu/reduce.h's scale.
// Each op exists for fp32 and bf16 storage (fp32 arithmetic either way), plus fp32 <-> bf16 conversion.
// Legend: N elements. Grad rules: gelu/dropout dinp =; residual dinp1, dinp2 += (residual stream).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace llmt::kernels::cuda {

#define LLMT_ELEMENTWISE_DECL(T)                                                                          \
    void gelu_forward(T* out, const T* inp, size_t N, cudaStream_t stream);                               \
    void gelu_backward(T* dinp, const T* inp, const T* dout, size_t N, cudaStream_t stream);              \
    void residual_forward(T* out, const T* inp1, const T* inp2, size_t N, cudaStream_t stream);           \
    void residual_backward(T* dinp1, T* dinp2, const T* dout, size_t N, cudaStream_t stream);             \
    /* out (N) = keep_i ? inp_i / (1 - p) : 0, keep_i = splitmix64(splitmix64(seed) + i) >> 40 >= p 2^24 */ \
    void dropout_forward(T* out, const T* inp, float p, uint64_t seed, size_t N, cudaStream_t stream);    \
    void dropout_backward(T* dinp, const T* dout, float p, uint64_t seed, size_t N, cudaStream_t stream);
LLMT_ELEMENTWISE_DECL(float)
LLMT_ELEMENTWISE_DECL(__nv_bfloat16)
#undef LLMT_ELEMENTWISE_DECL

void scale_inplace(float* x, size_t N, float s, cudaStream_t stream);
// dst (N) = src rounded to nearest even (fp32 -> bf16), or widened (bf16 -> fp32).
void convert(__nv_bfloat16* dst, const float* src, size_t N, cudaStream_t stream);
void convert(float* dst, const __nv_bfloat16* src, size_t N, cudaStream_t stream);

}  // namespace llmt::kernels::cuda
