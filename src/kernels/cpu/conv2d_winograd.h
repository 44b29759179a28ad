// 3x3 stride-1 pad-1 convolution on NHWC activations by Winograd's minimal filtering F(2x2, 3x3) (Lavin & Gray,
// "Fast Algorithms for Convolutional Neural Networks", 2015): each 2x2 output tile is A^T [U . V] A with
// V = B^T d B the 4x4 input tile d transformed and U = G g G^T the 3x3 filter g transformed, so the 16
// transform-domain points are 16 GEMMs of (tiles, C) @ (C, OC): 16 multiplies per tile and channel pair
// instead of im2col's 36 (2.25x fewer FLOPs). The backward is the exact adjoint of the same three linear maps:
// dM = A dY A^T, dU = sum over tiles of dM^T V (then dweight += G^T dU G), dV = dM U (then dinp = B dV B^T
// scattered back over the overlapping 4x4 tiles). cpu/conv2d.cpp calls it where it applies (below) and
// keeps im2col + GEMM elsewhere.
// Work is split into chunks of whole images (about kChunkTiles tiles, fixed by B and the shape, never by the
// thread count); a chunk runs on one thread with single-threaded GEMMs, so results do not depend on the
// thread count, and the weight gradient sums the chunks' partials in chunk order.
// Legend: B batch, H/W height/width (output = input size), C input channels, OC output channels; tiles
// TH = ceil(H/2) x TW = ceil(W/2) per image. Grad convention (src/kernels/README.md): dinp =; dweight, dbias +=.
#pragma once

#include <cstddef>

#include "kernels/conv_geom.h"

namespace llmt::kernels::cpu {

// True for a 3x3, stride 1, pad 1 convolution of an H, W >= 2 input with C >= 8 channels whose GEMMs run in
// fp32 (bf16 GEMMs keep im2col, whose operands are rounded as the bf16 tests define). C = 1 (a grey image's
// first layer) stays on im2col: its 16 GEMMs would have K = 1.
bool winograd_applies(const ConvShape& s);

// The floats the forward saves for the backward: V, 16 x C per tile (B*TH*TW tiles), which fits the im2col
// buffer (B*H*W x 9*C floats) whenever winograd_applies.
size_t winograd_saved_floats(const ConvShape& s);

// out (B,H,W,OC) = conv(inp (B,H,W,C), weight (OC,3,3,C)) + bias (OC, may be null); saved (winograd_saved_floats)
// receives the transformed input tiles the backward reads.
void conv2d_winograd_forward(float* out, float* saved, const float* inp, const float* weight, const float* bias,
                             const ConvShape& s);

// dbias (OC) += column sums of dout (null: skipped); dweight (OC,3,3,C) += the weight gradient; then, when dinp
// is not null, dinp (B,H,W,C) = the input gradient. dout (B,H,W,OC); saved as the forward left it (scratch
// afterwards).
void conv2d_winograd_backward(float* dinp, float* dweight, float* dbias, const float* dout, float* saved,
                              const float* weight, const ConvShape& s);

}  // namespace llmt::kernels::cpu
