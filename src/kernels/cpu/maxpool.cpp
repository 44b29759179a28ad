// Max pooling, parallel over images (an image's dinp is written by one thread only: no races with
// overlapping windows, and the result does not depend on the thread count).
#include "kernels/cpu/maxpool.h"

#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

namespace llmt::kernels::cpu {
namespace {

// One output pixel's C channels: channel c takes the max over the window (first max, NaN wins).
void pool_pixel(float* out, int32_t* arg, const float* img, const PoolShape& s, int oh, int ow) {
    const size_t C = static_cast<size_t>(s.C);
    const int h0 = oh * s.stride, w0 = ow * s.stride;
    const float* first = img + (static_cast<size_t>(h0) * s.W + w0) * C;
    const int32_t first_idx = h0 * s.W + w0;
    for (size_t c = 0; c < C; c++) {
        out[c] = first[c];
        arg[c] = first_idx;
    }
    for (int kh = 0; kh < s.k; kh++)
        for (int kw = 0; kw < s.k; kw++) {
            if (kh == 0 && kw == 0) continue;
            const int32_t idx = (h0 + kh) * s.W + (w0 + kw);
            const float* p = img + static_cast<size_t>(idx) * C;
            for (size_t c = 0; c < C; c++) {
                const float v = p[c];
                if (v > out[c] || (std::isnan(v) && !std::isnan(out[c]))) {
                    out[c] = v;
                    arg[c] = idx;
                }
            }
        }
}

}  // namespace

void maxpool2d_forward(float* out, int32_t* argmax, const float* inp, const PoolShape& s) {
    const size_t C = static_cast<size_t>(s.C), img = static_cast<size_t>(s.H) * s.W * C;
#pragma omp parallel for schedule(static)
    for (long r = 0; r < static_cast<long>(s.B) * s.OH; r++) {
        const long b = r / s.OH;
        const int oh = static_cast<int>(r % s.OH);
        for (int ow = 0; ow < s.OW; ow++) {
            const size_t o = ((static_cast<size_t>(r)) * s.OW + ow) * C;
            pool_pixel(out + o, argmax + o, inp + b * img, s, oh, ow);
        }
    }
}

void maxpool2d_backward(float* dinp, const float* dout, const int32_t* argmax, const PoolShape& s) {
    const size_t C = static_cast<size_t>(s.C), img = static_cast<size_t>(s.H) * s.W * C;
    const size_t oimg = static_cast<size_t>(s.OH) * s.OW * C;
#pragma omp parallel for schedule(static)
    for (int b = 0; b < s.B; b++) {
        float* d = dinp + b * img;
        std::memset(d, 0, img * sizeof(float));
        const float* g = dout + b * oimg;
        const int32_t* a = argmax + b * oimg;
        for (size_t i = 0; i < oimg; i++) d[static_cast<size_t>(a[i]) * C + i % C] += g[i];
    }
}

}  // namespace llmt::kernels::cpu
