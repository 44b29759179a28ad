// Convolution as im2col + GEMM on NHWC tensors. With channels last, each (kh, kw) tap of an output pixel is
// one contiguous run of C input floats, and the KW taps of a kernel row one run of KW*C floats, so im2col and
// col2im are row copies / row adds; both are parallel over output rows of the image (im2col) or over images
// (col2im: an image's dinp is written by its own thread only, so the result does not depend on the thread
// count).
// Why im2col + GEMM, also for MNIST's 1-channel first layer (measured on the 2-core EPYC, 1 thread, B=128,
// 28x28x1 -> 32, 3x3 pad 1, fastest of 40): a direct loop vectorised over OC took 10.3 ms forward (2.6 ms
// with OC a compile-time constant) against 2.0 ms for im2col (0.9 ms once short taps are copied by a loop
// instead of memcpy calls) + oneDNN's GEMM with K = 9 (0.7 ms, ~85 GFLOP/s); its weight gradient took
// 4.7 ms (1.6 ms templated) against 1.8-2.1 ms for the GEMM from the saved cols. The 14x14x32 -> 64 layer's
// time is its three GEMMs (M = 25088, N = 64 or 288, K = 288 or 64 or 25088; 34-46 GFLOP/s per core with
// oneDNN; transposed or per-image single-threaded variants measured no faster); im2col and col2im are
// 2 ms each of its ~90 ms per step (bench/conv_cpu, docs/benchmarks.md).
#include "kernels/cpu/conv2d.h"

#include <cstddef>
#include <cstring>
#include <vector>

#include "kernels/cpu/conv2d_winograd.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/matmul.h"

namespace llmt::kernels::cpu {
namespace {

size_t kdim(const ConvShape& s) { return static_cast<size_t>(s.g.kh) * s.g.kw * s.C; }

// The GEMMs' precision: the process's (trainer.precision), except fp32 for K < 16 (a grey image's first
// layer, K = 9): such a GEMM is memory-bound and rounding its tall operand to bf16 costs more than the bf16
// products save (1 thread, M = 100352, N = 32, K = 9: 0.90 ms fp32, 1.81 ms bf16 CPU time).
MatmulPrecision gemm_precision(const ConvShape& s) {
    return kdim(s) < 16 ? MatmulPrecision::kF32 : matmul_precision();
}
constexpr size_t kMemcpyMin = 16;  // floats

// Copies n floats; short runs (C = 1: a tap is 4 bytes) by a plain loop, which costs less than a memcpy call.
inline void copy_run(float* dst, const float* src, size_t n) {
    if (n >= kMemcpyMin)
        std::memcpy(dst, src, n * sizeof(float));
    else
        for (size_t i = 0; i < n; i++) dst[i] = src[i];
}

inline void zero_run(float* dst, size_t n) {
    if (n >= kMemcpyMin)
        std::memset(dst, 0, n * sizeof(float));
    else
        for (size_t i = 0; i < n; i++) dst[i] = 0.0f;
}

// The cols rows of output row (b, oh): OW rows of KH*KW*C. The KW taps of one kernel row are adjacent in
// NHWC memory, so a window wholly inside the image copies one run of KW*C floats per kernel row.
void im2col_row(float* cols, const float* img, const ConvShape& s, int oh) {
    const size_t K = kdim(s), C = static_cast<size_t>(s.C), run = static_cast<size_t>(s.g.kw) * C;
    for (int ow = 0; ow < s.OW; ow++) {
        float* dst = cols + static_cast<size_t>(ow) * K;
        const int iw0 = ow * s.g.stride - s.g.pad;
        const bool cols_inside = iw0 >= 0 && iw0 + s.g.kw <= s.W;
        for (int kh = 0; kh < s.g.kh; kh++, dst += run) {
            const int ih = oh * s.g.stride - s.g.pad + kh;
            if (ih < 0 || ih >= s.H) {
                zero_run(dst, run);
                continue;
            }
            const float* src_row = img + static_cast<size_t>(ih) * s.W * C;
            if (cols_inside) {
                copy_run(dst, src_row + static_cast<size_t>(iw0) * C, run);
                continue;
            }
            for (int kw = 0; kw < s.g.kw; kw++) {
                const int iw = iw0 + kw;
                if (iw < 0 || iw >= s.W)
                    zero_run(dst + kw * C, C);
                else
                    copy_run(dst + kw * C, src_row + static_cast<size_t>(iw) * C, C);
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

// dweight (OC, K) += (cols^T (K, rows) @ dout (rows, OC))^T in fp32. For a thin K (the 1-channel first layer,
// K = 9 against OC = 32) this orientation runs 2x faster than dout^T @ cols (1 thread, rows = 100352: 0.72
// vs 1.61 ms with oneDNN: a 9-wide output tile wastes most of a 32-wide FMA block); for K >= OC the two
// measured equal (K = 288, OC = 64: 9.6 vs 9.4 ms).
void weight_grad_transposed(float* dweight, const float* dout, const float* cols, int rows, int K, int OC) {
    thread_local std::vector<float> t;
    t.resize(static_cast<size_t>(K) * OC);
    sgemm(true, false, K, OC, rows, 1.0f, cols, K, dout, OC, 0.0f, t.data(), OC);
    for (int o = 0; o < OC; o++)
        for (int k = 0; k < K; k++) dweight[static_cast<size_t>(o) * K + k] += t[static_cast<size_t>(k) * OC + o];
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
    if (winograd_applies(s)) return conv2d_winograd_forward(out, cols, inp, weight, bias, s);
    im2col(cols, inp, s);
    matmul_forward(out, cols, weight, bias, s.B * s.OH * s.OW, static_cast<int>(kdim(s)), s.OC, gemm_precision(s));
}

void conv2d_backward(float* dinp, float* dweight, float* dbias, const float* dout, float* cols, const float* weight,
                     const ConvShape& s) {
    if (winograd_applies(s)) return conv2d_winograd_backward(dinp, dweight, dbias, dout, cols, weight, s);
    const int rows = s.B * s.OH * s.OW, K = static_cast<int>(kdim(s));
    if (dweight && K < s.OC && gemm_precision(s) == MatmulPrecision::kF32) {
        weight_grad_transposed(dweight, dout, cols, rows, K, s.OC);
        dweight = nullptr;
    }
    matmul_backward(nullptr, dweight, dbias, dout, cols, weight, rows, K, s.OC, gemm_precision(s));
    if (!dinp) return;
    // dcols = dout @ weight, over the saved cols (read above), in the linear layers' GEMM precision (bf16 when
    // the run asks for it, matmul.h).
    matmul_backward(cols, nullptr, nullptr, dout, nullptr, weight, rows, K, s.OC, gemm_precision(s));
    col2im(dinp, cols, s);
}

}  // namespace llmt::kernels::cpu
