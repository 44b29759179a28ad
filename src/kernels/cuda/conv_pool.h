// A CNN block's forward in one CUDA kernel: pooled = ReLU(maxpool 2x2(conv 3x3, pad 1, stride 1 (inp) + bias)),
// fp32 NHWC, the same values and argmax as cuda/conv.h's conv2d_forward -> maxpool2d_forward -> relu_forward
// without writing the convolution's output or its im2col (kernels/ops.h conv_pool_relu_forward).
// The product runs on the tensor cores as an implicit GEMM (output pixels x output channels, K = 9 * C taps
// read from the input tile in shared memory), in TF32 (tf32: PyTorch's default for convolutions, ~1e-3
// relative) or in "3xTF32": each fp32 operand split into a TF32 high part and a TF32 remainder, and
// hi*hi + hi*lo + lo*hi keeps fp32-level accuracy (~3e-6 of the largest output on the test shapes, against
// ~1e-7 for cuBLASLt's fp32 GEMM: the tensor cores' accumulation rounds more) at three times the products.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/conv_geom.h"

namespace llmt::kernels::cuda {

// Whether the fused kernel takes this convolution: 3x3, pad 1, stride 1, OC a multiple of 32, and a tile
// of the input plus a 32- or 64-channel slice of the weights fits in shared memory.
bool conv_pool_relu_fits(const ConvShape& s);

// pooled (B, H/2, W/2, OC) = ReLU(maxpool(conv(inp) + bias)) (floor pooling); argmax (same shape, i32: the
// window's first maximum as h * W + w of the convolution's output plane, maxpool2d_forward's convention)
// is written when not null. inp (B,H,W,C), weight (OC,3,3,C), bias (OC) or null. Needs conv_pool_relu_fits.
void conv_pool_relu_forward(float* pooled, int32_t* argmax, const float* inp, const float* weight, const float* bias,
                            const ConvShape& s, bool tf32, cudaStream_t stream);

}  // namespace llmt::kernels::cuda
