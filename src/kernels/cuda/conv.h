// The image ops on CUDA, same semantics as cpu/conv2d.h, cpu/maxpool.h and cpu/relu.h (NHWC activations,
// conv weights (OC,KH,KW,C)), for fp32 and bf16 storage with fp32 arithmetic; parameter gradients fp32.
// The convolution is im2col + cuBLASLt (cuda/matmul.h): cols (B*OH*OW, KH*KW*C) in the activations' type,
// out = cols @ weight^T + bias as matmul_forward (bias in the epilogue), dweight += dout^T @ cols and
// dcols = dout @ weight as cuda::gemm, then col2im as a gather (one thread per input element summing the
// cols entries that read it: no atomics, deterministic). Max pooling's backward is a gather too.
// tf32: fp32 GEMMs on TF32 tensor cores (trainer.conv_tf32; bf16 ignores it). Grad rules: dinp =; dweight, dbias +=.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/conv_geom.h"

namespace llmt::kernels::cuda {

#define LLMT_CONV_DECL(T)                                                                                        \
    void conv2d_forward(T* out, T* cols, const T* inp, const T* weight, const T* bias, const ConvShape& s,         \
                        cudaStream_t stream, bool tf32);                                                         \
    void conv2d_backward(T* dinp, float* dweight, float* dbias, const T* dout, T* cols, const T* weight,           \
                         const ConvShape& s, cudaStream_t stream, bool tf32);                                    \
    void conv2d_im2col(T* cols, const T* inp, const ConvShape& s, cudaStream_t stream);                          \
    void maxpool2d_forward(T* out, int32_t* argmax, const T* inp, const PoolShape& s, cudaStream_t stream);        \
    void maxpool2d_backward(T* dinp, const T* dout, const int32_t* argmax, const PoolShape& s, cudaStream_t stream); \
    void relu_forward(T* out, const T* inp, size_t N, cudaStream_t stream);                                      \
    void relu_backward(T* dinp, const T* dout, const T* out, size_t N, cudaStream_t stream);
LLMT_CONV_DECL(float)
LLMT_CONV_DECL(__nv_bfloat16)
#undef LLMT_CONV_DECL

}  // namespace llmt::kernels::cuda
