// Max pooling, parallel over images (an image's dinp is written by one thread only: no races with
// overlapping windows, and the result does not depend on the thread count).
#include "kernels/cpu/maxpool.h"

#include <immintrin.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "kernels/cpu/simd.h"

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
                if (v > out[c] || (v != v && out[c] == out[c])) {
                    out[c] = v;
                    arg[c] = idx;
                }
            }
        }
}

// The 2x2 window (the classifier's pool) on AVX-512: 16 channels per step, the four taps compared with
// mask registers instead of branches (same rule: larger, or the first NaN). The branchy loop above
// mispredicts on random activations and took 28% of a 1-thread MNIST CNN training step (perf), more than
// a convolution's GEMM; GCC does not if-convert it (float compare + int32 select). Channels beyond a
// multiple of 16 take the scalar rule.
__attribute__((target("avx512f"))) void pool2x2_pixel_avx512(float* out, int32_t* arg, const float* img,
                                                              const PoolShape& s, int oh, int ow) {
    const size_t C = static_cast<size_t>(s.C);
    const int32_t idx[4] = {oh * s.stride * s.W + ow * s.stride, idx[0] + 1, idx[0] + s.W, idx[0] + s.W + 1};
    const float* p[4];
    for (int t = 0; t < 4; t++) p[t] = img + static_cast<size_t>(idx[t]) * C;
    size_t c = 0;
    for (; c + 16 <= C; c += 16) {
        __m512 best = _mm512_loadu_ps(p[0] + c);
        __m512i at = _mm512_set1_epi32(idx[0]);
        for (int t = 1; t < 4; t++) {
            const __m512 v = _mm512_loadu_ps(p[t] + c);
            const __mmask16 take =
                _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) |
                (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) & _mm512_cmp_ps_mask(best, best, _CMP_ORD_Q));
            best = _mm512_mask_mov_ps(best, take, v);
            at = _mm512_mask_mov_epi32(at, take, _mm512_set1_epi32(idx[t]));
        }
        _mm512_storeu_ps(out + c, best);
        _mm512_storeu_si512(arg + c, at);
    }
    for (; c < C; c++) {
        float best = p[0][c];
        int32_t at = idx[0];
        for (int t = 1; t < 4; t++) {
            const float v = p[t][c];
            if (v > best || (v != v && best == best)) {
                best = v;
                at = idx[t];
            }
        }
        out[c] = best;
        arg[c] = at;
    }
}

// One image's dinp (H,W,C) = 0, then each output element's gradient added at its argmax (windows may overlap).
void pool_backward_image(float* d, const float* g, const int32_t* a, const PoolShape& s) {
    const size_t C = static_cast<size_t>(s.C), pixels = static_cast<size_t>(s.OH) * s.OW;
    std::memset(d, 0, static_cast<size_t>(s.H) * s.W * C * sizeof(float));
    for (size_t p = 0; p < pixels; p++)
        for (size_t c = 0; c < C; c++) d[static_cast<size_t>(a[p * C + c]) * C + c] += g[p * C + c];
}

// The 2x2 stride-2 case: the windows do not overlap, so every input element is written once, with its window's
// gradient where the argmax points and 0 elsewhere (no zeroing pass, no scatter; vectorised over C). A last
// row or column outside every window (odd H or W) is zeroed.
LLMT_CPU_CLONES
void pool2x2_backward_image(float* d, const float* g, const int32_t* a, const PoolShape& s) {
    const size_t C = static_cast<size_t>(s.C), W = static_cast<size_t>(s.W);
    for (int oh = 0; oh < s.OH; oh++) {
        for (int ow = 0; ow < s.OW; ow++) {
            const size_t o = (static_cast<size_t>(oh) * s.OW + ow) * C;
            const auto i0 = static_cast<int32_t>(2 * oh * s.W + 2 * ow), i1 = i0 + 1;
            const auto i2 = static_cast<int32_t>(i0 + s.W), i3 = i2 + 1;
            float *p0 = d + static_cast<size_t>(i0) * C, *p1 = p0 + C, *p2 = p0 + W * C, *p3 = p2 + C;
            const float* gv = g + o;
            const int32_t* av = a + o;
#pragma omp simd
            for (size_t c = 0; c < C; c++) {
                p0[c] = av[c] == i0 ? gv[c] : 0.0f;
                p1[c] = av[c] == i1 ? gv[c] : 0.0f;
                p2[c] = av[c] == i2 ? gv[c] : 0.0f;
                p3[c] = av[c] == i3 ? gv[c] : 0.0f;
            }
        }
        if (s.W > 2 * s.OW)  // the last column of both rows
            for (int r = 0; r < 2; r++) std::memset(d + ((2 * oh + r) * W + W - 1) * C, 0, C * sizeof(float));
    }
    if (s.H > 2 * s.OH)  // the last row
        std::memset(d + 2 * static_cast<size_t>(s.OH) * W * C, 0, (s.H - 2 * s.OH) * W * C * sizeof(float));
}

}  // namespace

void maxpool2d_forward(float* out, int32_t* argmax, const float* inp, const PoolShape& s) {
    const bool vec2x2 = s.k == 2 && simd::isa() == simd::Isa::kAvx512;
    const size_t C = static_cast<size_t>(s.C), img = static_cast<size_t>(s.H) * s.W * C;
#pragma omp parallel for schedule(static)
    for (long r = 0; r < static_cast<long>(s.B) * s.OH; r++) {
        const long b = r / s.OH;
        const int oh = static_cast<int>(r % s.OH);
        for (int ow = 0; ow < s.OW; ow++) {
            const size_t o = ((static_cast<size_t>(r)) * s.OW + ow) * C;
            if (vec2x2) pool2x2_pixel_avx512(out + o, argmax + o, inp + b * img, s, oh, ow);
            else pool_pixel(out + o, argmax + o, inp + b * img, s, oh, ow);
        }
    }
}

void maxpool2d_backward(float* dinp, const float* dout, const int32_t* argmax, const PoolShape& s) {
    const size_t C = static_cast<size_t>(s.C), img = static_cast<size_t>(s.H) * s.W * C;
    const size_t oimg = static_cast<size_t>(s.OH) * s.OW * C;
#pragma omp parallel for schedule(static)
    for (int b = 0; b < s.B; b++) {
        if (s.k == 2 && s.stride == 2) pool2x2_backward_image(dinp + b * img, dout + b * oimg, argmax + b * oimg, s);
        else pool_backward_image(dinp + b * img, dout + b * oimg, argmax + b * oimg, s);
    }
}

}  // namespace llmt::kernels::cpu
