// 2-D max pooling on channels-last (NHWC) activations, torch.nn.MaxPool2d(k, stride) without padding:
// OH = floor((H - k) / stride) + 1 (odd sizes drop the last row/column, as torch's default floor mode).
// The forward records, per output element, where its maximum came from (the flat spatial index ih*W + iw
// in its image, as torch's return_indices), so the backward is a scatter. Ties go to the first element in
// row-major window order, NaN wins (torch's rule), so gradients land where torch puts them.
// Legend: B batch, H/W input height/width, OH/OW output height/width, C channels.
// Grad convention (src/kernels/README.md): dinp =.
#pragma once

#include <cstdint>

#include "kernels/conv_geom.h"

namespace llmt::kernels::cpu {

using kernels::PoolShape;

// out (B,OH,OW,C) = the max of each k x k window; argmax (B,OH,OW,C) = its flat index ih*W + iw.
void maxpool2d_forward(float* out, int32_t* argmax, const float* inp, const PoolShape& s);
// dinp (B,H,W,C) = 0 except dinp[b, argmax, c] += dout[b, oh, ow, c].
void maxpool2d_backward(float* dinp, const float* dout, const int32_t* argmax, const PoolShape& s);

}  // namespace llmt::kernels::cpu
