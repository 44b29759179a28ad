// Geometry of the image ops (kernels/ops.h conv2d_*, maxpool2d_*), shared by the CPU and CUDA backends.
#pragma once

#include <cstdint>

namespace llmt::kernels {

// A kh x kw window moved by `stride` over the input zero-padded by `pad` on every side (torch.nn.Conv2d's
// kernel_size, stride, padding; dilation 1, groups 1).
struct Conv2dGeom {
    int kh = 3, kw = 3, stride = 1, pad = 1;
};

// Output extent of an input extent n along one axis: floor((n + 2 pad - k) / stride) + 1, as torch's
// (<= 0 when the window does not fit).
inline int64_t conv_out_extent(int64_t n, int k, int stride, int pad) {
    const int64_t span = n + 2 * static_cast<int64_t>(pad) - k;
    return span < 0 ? 0 : span / stride + 1;
}

// A convolution's sizes as the backends take them (ops_conv.cpp checks them): inp (B,H,W,C), out (B,OH,OW,OC).
struct ConvShape {
    int B, H, W, C, OH, OW, OC;
    Conv2dGeom g;
};

// A max pooling's sizes: inp (B,H,W,C), out (B,OH,OW,C), a k x k window at stride `stride`.
struct PoolShape {
    int B, H, W, C, OH, OW, k, stride;
};

}  // namespace llmt::kernels
