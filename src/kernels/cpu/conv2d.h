// 2-D convolution on channels-last (NHWC) activations as im2col + one GEMM (cpu/gemm.h):
//   cols (B*OH*OW, KH*KW*C)  row (b,oh,ow), column (kh*KW + kw)*C + c = inp[b, oh*s - pad + kh, ow*s - pad + kw, c]
//                            (0 outside the image)
//   out (B*OH*OW, OC) = cols @ weight (OC, KH*KW*C)^T + bias
// so the weight is stored (OC, KH, KW, C): torch's Conv2d weight (OC, C, KH, KW) permuted by (0, 2, 3, 1)
// (w_ours = w_torch.permute(0, 2, 3, 1)), and NHWC activations are torch's NCHW permuted by (0, 2, 3, 1).
// The backward reads the forward's cols (the im2col of inp, which the model keeps as a saved activation)
// for dweight, then reuses the same buffer for dcols = dout @ weight, scattered back by col2im.
// 3x3 stride-1 pad-1 layers with C >= 8 in fp32 run Winograd F(2x2, 3x3) instead (cpu/conv2d_winograd.h,
// 2.25x fewer multiplies); cols then holds its transformed input tiles, which fit the same buffer.
// The three GEMMs are matmul.h's, so they run in the process's GEMM precision (fp32, or bf16 operands with
// fp32 accumulation under trainer.precision: bf16), except that K = KH*KW*C < 16 stays fp32 (conv2d.cpp).
// Legend: B batch, H/W input height/width, C input channels, OH/OW output height/width, OC output channels.
// Grad convention (src/kernels/README.md): dinp =; dweight, dbias +=.
#pragma once

#include "kernels/conv_geom.h"

namespace llmt::kernels::cpu {

using kernels::ConvShape;

// cols (B*OH*OW, KH*KW*C) = im2col(inp (B,H,W,C)); out (B,OH,OW,OC) = cols @ weight^T + bias (bias may be null).
void conv2d_forward(float* out, float* cols, const float* inp, const float* weight, const float* bias,
                    const ConvShape& s);

// dbias (OC) += sum of dout's rows (null: skipped); dweight (OC, KH*KW*C) += dout^T @ cols; then, when dinp is
// not null, cols = dout @ weight and dinp (B,H,W,C) = col2im(cols) (cols is scratch afterwards).
// dout (B,OH,OW,OC); cols as the forward left it; weight (OC, KH*KW*C).
void conv2d_backward(float* dinp, float* dweight, float* dbias, const float* dout, float* cols, const float* weight,
                     const ConvShape& s);

// The two halves of the lowering, for tests and the CUDA-less benchmark: cols = im2col(inp), and
// dinp = col2im(cols) (sum of every column entry that reads an input element; dinp written, =).
void im2col(float* cols, const float* inp, const ConvShape& s);
void col2im(float* dinp, const float* cols, const ConvShape& s);

}  // namespace llmt::kernels::cpu
