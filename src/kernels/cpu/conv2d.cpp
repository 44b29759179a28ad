// Convolution on NHWC tensors, two paths:
// - im2col + GEMM: with channels last, each (kh, kw) tap of an output pixel is one contiguous run of C input
//   floats, so im2col and col2im are row copies / row adds; both are parallel over output rows (im2col) or
//   over images (col2im: an image's dinp is written by its own thread only, so the result does not depend on
//   the thread count).
// - direct, for a small reduction K = KH*KW*C <= kDirectMaxK (MNIST's first layer: C = 1, K = 9): im2col's
//   rows would be a few floats each and the GEMM's K too short to run near peak, so each output pixel's OC
//   sums are formed in place, vectorised over OC, reading inp directly (cols is not touched by the forward).
//   dweight and dbias are summed per image into partials added in image order (deterministic whatever the
//   thread count); dinp, when asked for, goes through the GEMM and col2im with cols as scratch.
//   bench/conv_cpu (docs in its header): at B=128, 28x28x1 -> 32 ...
#include "kernels/cpu/conv2d.h"

#include <cstddef>
#include <cstring>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/simd.h"

namespace llmt::kernels::cpu {
namespace {

size_t kdim(const ConvShape& s) { return static_cast<size_t>(s.g.kh) * s.g.kw * s.C; }

constexpr size_t kDirectMaxK = 32;
bool direct(const ConvShape& s) { return kdim(s) <= kDirectMaxK; }

// wt (K, OC) = weight (OC, K) transposed, so the direct path's inner loops run over OC.
std::vector<float> transposed(const float* weight, size_t OC, size_t K) {
    std::vector<float> wt(K * OC);
    for (size_t o = 0; o < OC; o++)
        for (size_t k = 0; k < K; k++) wt[k * OC + o] = weight[o * K + k];
    return wt;
}

// out (OH*OW, OC) of one image: per pixel, bias + sum over the taps inside the image of x * wt.
LLMT_CPU_CLONES
void direct_forward_image(float* out, const float* img, const float* wt, const float* bias, const ConvShape& s) {
    const int OC = s.OC, C = s.C;
    for (int oh = 0; oh < s.OH; oh++)
        for (int ow = 0; ow < s.OW; ow++) {
            float* o = out + (static_cast<size_t>(oh) * s.OW + ow) * OC;
#pragma omp simd
            for (int j = 0; j < OC; j++) o[j] = bias ? bias[j] : 0.0f;
            for (int kh = 0; kh < s.g.kh; kh++) {
                const int ih = oh * s.g.stride - s.g.pad + kh;
                if (ih < 0 || ih >= s.H) continue;
                for (int kw = 0; kw < s.g.kw; kw++) {
                    const int iw = ow * s.g.stride - s.g.pad + kw;
                    if (iw < 0 || iw >= s.W) continue;
                    const float* x = img + (static_cast<size_t>(ih) * s.W + iw) * C;
                    const float* w = wt + static_cast<size_t>(kh * s.g.kw + kw) * C * OC;
                    for (int c = 0; c < C; c++) {
                        const float xv = x[c];
#pragma omp simd
                        for (int j = 0; j < OC; j++) o[j] += xv * w[static_cast<size_t>(c) * OC + j];
                    }
                }
            }
        }
}

// One image's dweight^T (K, OC) and dbias (OC) partials (written): sums over its pixels of x * dout, dout.
LLMT_CPU_CLONES
void direct_dweight_image(float* dwt, float* db, const float* img, const float* dout, const ConvShape& s) {
    const int OC = s.OC, C = s.C;
    std::memset(dwt, 0, kdim(s) * OC * sizeof(float));
    std::memset(db, 0, static_cast<size_t>(OC) * sizeof(float));
    for (int oh = 0; oh < s.OH; oh++)
        for (int ow = 0; ow < s.OW; ow++) {
            const float* g = dout + (static_cast<size_t>(oh) * s.OW + ow) * OC;
#pragma omp simd
            for (int j = 0; j < OC; j++) db[j] += g[j];
            for (int kh = 0; kh < s.g.kh; kh++) {
                const int ih = oh * s.g.stride - s.g.pad + kh;
                if (ih < 0 || ih >= s.H) continue;
                for (int kw = 0; kw < s.g.kw; kw++) {
                    const int iw = ow * s.g.stride - s.g.pad + kw;
                    if (iw < 0 || iw >= s.W) continue;
                    const float* x = img + (static_cast<size_t>(ih) * s.W + iw) * C;
                    float* d = dwt + static_cast<size_t>(kh * s.g.kw + kw) * C * OC;
                    for (int c = 0; c < C; c++) {
                        const float xv = x[c];
#pragma omp simd
                        for (int j = 0; j < OC; j++) d[static_cast<size_t>(c) * OC + j] += xv * g[j];
                    }
                }
            }
        }
}

void direct_forward(float* out, const float* inp, const float* weight, const float* bias, const ConvShape& s) {
    const std::vector<float> wt = transposed(weight, s.OC, kdim(s));
    const size_t img = static_cast<size_t>(s.H) * s.W * s.C, oimg = static_cast<size_t>(s.OH) * s.OW * s.OC;
#pragma omp parallel for schedule(static)
    for (int b = 0; b < s.B; b++) direct_forward_image(out + b * oimg, inp + b * img, wt.data(), bias, s);
}

// dweight, dbias += the per-image partials, added in image order.
void direct_param_grads(float* dweight, float* dbias, const float* inp, const float* dout, const ConvShape& s) {
    const size_t K = kdim(s), OC = static_cast<size_t>(s.OC), part = K * OC + OC;
    const size_t img = static_cast<size_t>(s.H) * s.W * s.C, oimg = static_cast<size_t>(s.OH) * s.OW * OC;
    std::vector<float> partials(part * static_cast<size_t>(s.B));
#pragma omp parallel for schedule(static)
    for (int b = 0; b < s.B; b++) {
        float* p = partials.data() + b * part;
        direct_dweight_image(p, p + K * OC, inp + b * img, dout + b * oimg, s);
    }
    for (int b = 0; b < s.B; b++) {
        const float* p = partials.data() + b * part;
        if (dweight)
            for (size_t o = 0; o < OC; o++)
                for (size_t k = 0; k < K; k++) dweight[o * K + k] += p[k * OC + o];
        if (dbias)
            for (size_t o = 0; o < OC; o++) dbias[o] += p[K * OC + o];
    }
}

// The cols rows of output row (b, oh): OW rows of KH*KW*C.
void im2col_row(float* cols, const float* img, const ConvShape& s, int oh) {
    const size_t K = kdim(s), C = static_cast<size_t>(s.C);
    for (int ow = 0; ow < s.OW; ow++) {
        float* dst = cols + static_cast<size_t>(ow) * K;
        for (int kh = 0; kh < s.g.kh; kh++) {
            const int ih = oh * s.g.stride - s.g.pad + kh;
            for (int kw = 0; kw < s.g.kw; kw++, dst += C) {
                const int iw = ow * s.g.stride - s.g.pad + kw;
                if (ih < 0 || ih >= s.H || iw < 0 || iw >= s.W)
                    std::memset(dst, 0, C * sizeof(float));
                else
                    std::memcpy(dst, img + (static_cast<size_t>(ih) * s.W + iw) * C, C * sizeof(float));
            }
        }
    }
}

// dimg (H,W,C) = the sum of the cols entries of one image that read each element.
void col2im_image(float* dimg, const float* cols, const ConvShape& s) {
    const size_t K = kdim(s), C = static_cast<size_t>(s.C);
    std::memset(dimg, 0, static_cast<size_t>(s.H) * s.W * C * sizeof(float));
    for (int oh = 0; oh < s.OH; oh++)
        for (int ow = 0; ow < s.OW; ow++) {
            const float* src = cols + (static_cast<size_t>(oh) * s.OW + ow) * K;
            for (int kh = 0; kh < s.g.kh; kh++) {
                const int ih = oh * s.g.stride - s.g.pad + kh;
                for (int kw = 0; kw < s.g.kw; kw++, src += C) {
                    const int iw = ow * s.g.stride - s.g.pad + kw;
                    if (ih < 0 || ih >= s.H || iw < 0 || iw >= s.W) continue;
                    float* d = dimg + (static_cast<size_t>(ih) * s.W + iw) * C;
#pragma omp simd
                    for (size_t c = 0; c < C; c++) d[c] += src[c];
                }
            }
        }
}

}  // namespace

void im2col(float* cols, const float* inp, const ConvShape& s) {
    const size_t K = kdim(s), img = static_cast<size_t>(s.H) * s.W * s.C;
#pragma omp parallel for schedule(static)
    for (long r = 0; r < static_cast<long>(s.B) * s.OH; r++) {
        const long b = r / s.OH;
        const int oh = static_cast<int>(r % s.OH);
        im2col_row(cols + static_cast<size_t>(r) * s.OW * K, inp + b * img, s, oh);
    }
}

void col2im(float* dinp, const float* cols, const ConvShape& s) {
    const size_t K = kdim(s), img = static_cast<size_t>(s.H) * s.W * s.C;
    const size_t rows_per_image = static_cast<size_t>(s.OH) * s.OW;
#pragma omp parallel for schedule(static)
    for (int b = 0; b < s.B; b++) col2im_image(dinp + b * img, cols + b * rows_per_image * K, s);
}

void conv2d_forward(float* out, float* cols, const float* inp, const float* weight, const float* bias,
                    const ConvShape& s) {
    if (direct(s)) return direct_forward(out, inp, weight, bias, s);
    im2col(cols, inp, s);
    matmul_forward(out, cols, weight, bias, s.B * s.OH * s.OW, static_cast<int>(kdim(s)), s.OC);
}

void conv2d_backward(float* dinp, float* dweight, float* dbias, const float* dout, float* cols, const float* inp,
                     const float* weight, const ConvShape& s) {
    const int rows = s.B * s.OH * s.OW, K = static_cast<int>(kdim(s));
    if (direct(s))
        direct_param_grads(dweight, dbias, inp, dout, s);
    else
        matmul_backward(nullptr, dweight, dbias, dout, cols, weight, rows, K, s.OC);
    if (!dinp) return;
    sgemm(false, false, rows, K, s.OC, 1.0f, dout, s.OC, weight, K, 0.0f, cols, K);
    col2im(dinp, cols, s);
}

}  // namespace llmt::kernels::cpu
