// Winograd F(2x2, 3x3) convolution (conv2d_winograd.h). The four tile transforms are loops over channels
// (contiguous in NHWC, so each vectorises over C or OC); the 16 point-wise products are single-threaded GEMMs
// on one chunk of images at a time, the chunk's transform-domain tiles laid out point-major, (16, tiles, C),
// so every GEMM reads and writes contiguous rows.
// Transforms, 1-D (the 2-D ones apply them along rows, then columns):
//   input  B^T d: (d0 - d2, d1 + d2, d2 - d1, d1 - d3)       adjoint B dv: (v0, v1 - v2 + v3, v1 + v2 - v0, -v3)
//   filter G g:   (g0, (g0 + g1 + g2)/2, (g0 - g1 + g2)/2, g2)  adjoint G^T du: (u0 + (u1 + u2)/2, (u1 - u2)/2,
//                                                                                (u1 + u2)/2 + u3)
//   output A^T m: (m0 + m1 + m2, m1 - m2 - m3)                 adjoint A dy: (y0, y0 + y1, y0 - y1, -y1)
// Why here (1 thread, B = 128, 14x14x32 -> 64, fastest of 20, bench/conv_cpu): im2col + GEMM took 12.3 ms
// forward and 20.6 ms backward at 75-90 GFLOP/s; the 16 GEMMs per chunk run at 80-100 GFLOP/s on 2.25x fewer
// FLOPs (docs/benchmarks.md "The CNN's CPU training step").
#include "kernels/cpu/conv2d_winograd.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/simd.h"

namespace llmt::kernels::cpu {
namespace {

constexpr int kPoints = 16;  // 4x4 transform-domain points per tile
// Tiles per chunk: one-thread GEMMs of (392, 32) @ (32, 64) run at 75-90 GFLOP/s in the three forms, and the
// chunk's M (392 x 16 x 64 floats, 1.6 MB) stays near the core; the whole 14x14x32 -> 64 layer at B = 128 measured
// 196 / 392 / 784 / 1568 tiles: 7.1-7.2 / 6.7-7.0 / 7.2-7.3 / 7.7 ms forward, 11.2 / 10.8-11.2 / 11.3 / 11.4 backward.
constexpr int kChunkTiles = 392;

// How a batch is cut into tiles and chunks: a function of B and the shape only.
struct Tiling {
    int TH, TW, per_image;  // tiles per image: ceil(H/2) x ceil(W/2)
    int chunk_images;       // images per chunk (the last chunk may have fewer)
    int chunks;

    explicit Tiling(const ConvShape& s)
        : TH((s.H + 1) / 2),
          TW((s.W + 1) / 2),
          per_image(TH * TW),
          chunk_images(std::max(1, kChunkTiles / per_image)),
          chunks((s.B + chunk_images - 1) / chunk_images) {}

    int first_image(int k) const { return k * chunk_images; }
    int images(int k, int B) const { return std::min(chunk_images, B - first_image(k)); }
};

// One chunk's place in the batch: its images and where its tiles sit in `saved` and in the scratch.
struct Chunk {
    int b0, images;
    size_t tiles;  // images * per_image
};

Chunk chunk_of(const Tiling& tl, int k, int B) {
    const int images = tl.images(k, B);
    return {tl.first_image(k), images, static_cast<size_t>(images) * tl.per_image};
}

// A thread's scratch, grown on demand and kept (thread_local: each OpenMP worker has its own).
float* thread_scratch(size_t floats) {
    thread_local std::vector<float> buf;
    if (buf.size() < floats) buf.resize(floats);
    return buf.data();
}

// The 4x4 input window of tile (ty, tx) of one image: row pointers into the image, `zeros` outside it.
void window(const float* (&d)[4][4], const float* img, const ConvShape& s, int ty, int tx, const float* zeros) {
    const size_t C = static_cast<size_t>(s.C);
    for (int i = 0; i < 4; i++) {
        const int ih = 2 * ty - 1 + i;
        for (int j = 0; j < 4; j++) {
            const int iw = 2 * tx - 1 + j;
            const bool inside = ih >= 0 && ih < s.H && iw >= 0 && iw < s.W;
            d[i][j] = inside ? img + (static_cast<size_t>(ih) * s.W + iw) * C : zeros;
        }
    }
}

// The 1-D transforms on named scalars (GCC vectorises the channel loops below only when their bodies hold no
// arrays).
inline void input_1d(float d0, float d1, float d2, float d3, float& v0, float& v1, float& v2, float& v3) {
    v0 = d0 - d2;
    v1 = d1 + d2;
    v2 = d2 - d1;
    v3 = d1 - d3;
}
inline void input_1d_adjoint(float v0, float v1, float v2, float v3, float& d0, float& d1, float& d2, float& d3) {
    d0 = v0;
    d1 = v1 - v2 + v3;
    d2 = v1 + v2 - v0;
    d3 = -v3;
}
inline void output_1d(float m0, float m1, float m2, float m3, float& y0, float& y1) {
    y0 = m0 + m1 + m2;
    y1 = m1 - m2 - m3;
}
inline void output_1d_adjoint(float y0, float y1, float& m0, float& m1, float& m2, float& m3) {
    m0 = y0;
    m1 = y0 + y1;
    m2 = y0 - y1;
    m3 = -y1;
}

// V (16, tiles, C) of a chunk: V[4i + j][t] = (B^T d B)[i][j] of tile t's window d.
LLMT_CPU_CLONES
void input_transform(float* V, const float* inp, const Chunk& ch, const ConvShape& s, const Tiling& tl,
                     const float* zeros) {
    const size_t C = static_cast<size_t>(s.C), stride = ch.tiles * C, img = static_cast<size_t>(s.H) * s.W * C;
    for (int b = 0; b < ch.images; b++)
        for (int ty = 0; ty < tl.TH; ty++)
            for (int tx = 0; tx < tl.TW; tx++) {
                const float* d[4][4];
                window(d, inp + (ch.b0 + b) * img, s, ty, tx, zeros);
                float* v = V + (static_cast<size_t>(b) * tl.per_image + ty * tl.TW + tx) * C;
                float *v0 = v, *v1 = v0 + 4 * stride, *v2 = v1 + 4 * stride, *v3 = v2 + 4 * stride;
#pragma omp simd
                for (size_t c = 0; c < C; c++) {
                    float r00, r01, r02, r03, r10, r11, r12, r13, r20, r21, r22, r23, r30, r31, r32, r33;
                    input_1d(d[0][0][c], d[0][1][c], d[0][2][c], d[0][3][c], r00, r01, r02, r03);
                    input_1d(d[1][0][c], d[1][1][c], d[1][2][c], d[1][3][c], r10, r11, r12, r13);
                    input_1d(d[2][0][c], d[2][1][c], d[2][2][c], d[2][3][c], r20, r21, r22, r23);
                    input_1d(d[3][0][c], d[3][1][c], d[3][2][c], d[3][3][c], r30, r31, r32, r33);
                    input_1d(r00, r10, r20, r30, v0[c], v1[c], v2[c], v3[c]);
                    input_1d(r01, r11, r21, r31, v0[stride + c], v1[stride + c], v2[stride + c], v3[stride + c]);
                    input_1d(r02, r12, r22, r32, v0[2 * stride + c], v1[2 * stride + c], v2[2 * stride + c],
                             v3[2 * stride + c]);
                    input_1d(r03, r13, r23, r33, v0[3 * stride + c], v1[3 * stride + c], v2[3 * stride + c],
                             v3[3 * stride + c]);
                }
            }
}

// The 2x2 output pixels of tile (ty, tx): pointers into the image, `trash` (scratch) outside it.
void out_window(float* (&y)[2][2], float* img, int H, int W, size_t OC, int ty, int tx, float* trash) {
    for (int a = 0; a < 2; a++)
        for (int k = 0; k < 2; k++) {
            const int oh = 2 * ty + a, ow = 2 * tx + k;
            y[a][k] = oh < H && ow < W ? img + (static_cast<size_t>(oh) * W + ow) * OC : trash;
        }
}

// out = A^T M A + bias for every tile of a chunk; M (16, tiles, OC).
LLMT_CPU_CLONES
void output_transform(float* out, const float* M, const float* bias, const Chunk& ch, const ConvShape& s,
                      const Tiling& tl, float* trash) {
    const size_t OC = static_cast<size_t>(s.OC), stride = ch.tiles * OC, img = static_cast<size_t>(s.H) * s.W * OC;
    for (int b = 0; b < ch.images; b++)
        for (int ty = 0; ty < tl.TH; ty++)
            for (int tx = 0; tx < tl.TW; tx++) {
                float* y[2][2];
                out_window(y, out + (ch.b0 + b) * img, s.H, s.W, OC, ty, tx, trash);
                const float* m0 = M + (static_cast<size_t>(b) * tl.per_image + ty * tl.TW + tx) * OC;
                const float *m1 = m0 + 4 * stride, *m2 = m1 + 4 * stride, *m3 = m2 + 4 * stride;
                float *y00 = y[0][0], *y01 = y[0][1], *y10 = y[1][0], *y11 = y[1][1];
#pragma omp simd
                for (size_t o = 0; o < OC; o++) {
                    float r00, r01, r10, r11, r20, r21, r30, r31, a0, a1;
                    output_1d(m0[o], m0[stride + o], m0[2 * stride + o], m0[3 * stride + o], r00, r01);
                    output_1d(m1[o], m1[stride + o], m1[2 * stride + o], m1[3 * stride + o], r10, r11);
                    output_1d(m2[o], m2[stride + o], m2[2 * stride + o], m2[3 * stride + o], r20, r21);
                    output_1d(m3[o], m3[stride + o], m3[2 * stride + o], m3[3 * stride + o], r30, r31);
                    output_1d(r00, r10, r20, r30, a0, a1);
                    y00[o] = a0 + bias[o];
                    y10[o] = a1 + bias[o];
                    output_1d(r01, r11, r21, r31, a0, a1);
                    y01[o] = a0 + bias[o];
                    y11[o] = a1 + bias[o];
                }
            }
}

// dM (16, tiles, OC) = A dY A^T per tile, dY its 2x2 window of dout (zero outside the image).
LLMT_CPU_CLONES
void output_grad_transform(float* dM, const float* dout, const Chunk& ch, const ConvShape& s, const Tiling& tl,
                           const float* zeros) {
    const size_t OC = static_cast<size_t>(s.OC), stride = ch.tiles * OC, img = static_cast<size_t>(s.H) * s.W * OC;
    for (int b = 0; b < ch.images; b++)
        for (int ty = 0; ty < tl.TH; ty++)
            for (int tx = 0; tx < tl.TW; tx++) {
                const float* dy[2][2];
                for (int a = 0; a < 2; a++)
                    for (int k = 0; k < 2; k++) {
                        const int oh = 2 * ty + a, ow = 2 * tx + k;
                        dy[a][k] = oh < s.H && ow < s.W
                                       ? dout + (ch.b0 + b) * img + (static_cast<size_t>(oh) * s.W + ow) * OC
                                       : zeros;
                    }
                const float *y00 = dy[0][0], *y01 = dy[0][1], *y10 = dy[1][0], *y11 = dy[1][1];
                float* m0 = dM + (static_cast<size_t>(b) * tl.per_image + ty * tl.TW + tx) * OC;
                float *m1 = m0 + 4 * stride, *m2 = m1 + 4 * stride, *m3 = m2 + 4 * stride;
#pragma omp simd
                for (size_t o = 0; o < OC; o++) {
                    float e00, e01, e02, e03, e10, e11, e12, e13;
                    output_1d_adjoint(y00[o], y01[o], e00, e01, e02, e03);
                    output_1d_adjoint(y10[o], y11[o], e10, e11, e12, e13);
                    output_1d_adjoint(e00, e10, m0[o], m1[o], m2[o], m3[o]);
                    output_1d_adjoint(e01, e11, m0[stride + o], m1[stride + o], m2[stride + o], m3[stride + o]);
                    output_1d_adjoint(e02, e12, m0[2 * stride + o], m1[2 * stride + o], m2[2 * stride + o],
                                      m3[2 * stride + o]);
                    output_1d_adjoint(e03, e13, m0[3 * stride + o], m1[3 * stride + o], m2[3 * stride + o],
                                      m3[3 * stride + o]);
                }
            }
}

// dinp of the chunk's images = the sum over tiles of B dV B^T placed on each tile's 4x4 window (the padding
// ring dropped); dV (16, tiles, C). The images are written whole (zeroed first), by this thread only.
LLMT_CPU_CLONES
void input_grad_transform(float* dinp, const float* dV, const Chunk& ch, const ConvShape& s, const Tiling& tl,
                          float* trash) {
    const size_t C = static_cast<size_t>(s.C), stride = ch.tiles * C, img = static_cast<size_t>(s.H) * s.W * C;
    std::memset(dinp + ch.b0 * img, 0, static_cast<size_t>(ch.images) * img * sizeof(float));
    for (int b = 0; b < ch.images; b++)
        for (int ty = 0; ty < tl.TH; ty++)
            for (int tx = 0; tx < tl.TW; tx++) {
                float* d[4][4];
                for (int i = 0; i < 4; i++)
                    for (int j = 0; j < 4; j++) {
                        const int ih = 2 * ty - 1 + i, iw = 2 * tx - 1 + j;
                        d[i][j] = ih >= 0 && ih < s.H && iw >= 0 && iw < s.W
                                      ? dinp + (ch.b0 + b) * img + (static_cast<size_t>(ih) * s.W + iw) * C
                                      : trash;
                    }
                const float* v0 = dV + (static_cast<size_t>(b) * tl.per_image + ty * tl.TW + tx) * C;
                const float *v1 = v0 + 4 * stride, *v2 = v1 + 4 * stride, *v3 = v2 + 4 * stride;
#pragma omp simd
                for (size_t c = 0; c < C; c++) {
                    float q00, q01, q02, q03, q10, q11, q12, q13, q20, q21, q22, q23, q30, q31, q32, q33;
                    input_1d_adjoint(v0[c], v1[c], v2[c], v3[c], q00, q10, q20, q30);
                    input_1d_adjoint(v0[stride + c], v1[stride + c], v2[stride + c], v3[stride + c], q01, q11, q21,
                                     q31);
                    input_1d_adjoint(v0[2 * stride + c], v1[2 * stride + c], v2[2 * stride + c], v3[2 * stride + c],
                                     q02, q12, q22, q32);
                    input_1d_adjoint(v0[3 * stride + c], v1[3 * stride + c], v2[3 * stride + c], v3[3 * stride + c],
                                     q03, q13, q23, q33);
                    float e0, e1, e2, e3;
                    input_1d_adjoint(q00, q01, q02, q03, e0, e1, e2, e3);
                    d[0][0][c] += e0, d[0][1][c] += e1, d[0][2][c] += e2, d[0][3][c] += e3;
                    input_1d_adjoint(q10, q11, q12, q13, e0, e1, e2, e3);
                    d[1][0][c] += e0, d[1][1][c] += e1, d[1][2][c] += e2, d[1][3][c] += e3;
                    input_1d_adjoint(q20, q21, q22, q23, e0, e1, e2, e3);
                    d[2][0][c] += e0, d[2][1][c] += e1, d[2][2][c] += e2, d[2][3][c] += e3;
                    input_1d_adjoint(q30, q31, q32, q33, e0, e1, e2, e3);
                    d[3][0][c] += e0, d[3][1][c] += e1, d[3][2][c] += e2, d[3][3][c] += e3;
                }
            }
}

// U (16, OC, C) = G g G^T of every filter g = weight[oc, :, :, c].
void filter_transform(float* U, const float* weight, const ConvShape& s) {
    const size_t C = static_cast<size_t>(s.C), OC = static_cast<size_t>(s.OC), stride = OC * C;
    for (size_t o = 0; o < OC; o++)
        for (size_t c = 0; c < C; c++) {
            const float* g = weight + o * 9 * C + c;  // g[kh][kw] at (3 kh + kw) C
            float h[3][4];                             // G along kw, per kh
            for (int kh = 0; kh < 3; kh++) {
                const float g0 = g[(3 * kh) * C], g1 = g[(3 * kh + 1) * C], g2 = g[(3 * kh + 2) * C];
                h[kh][0] = g0;
                h[kh][1] = 0.5f * (g0 + g1 + g2);
                h[kh][2] = 0.5f * (g0 - g1 + g2);
                h[kh][3] = g2;
            }
            float* u = U + o * C + c;
            for (int j = 0; j < 4; j++) {
                u[(0 + j) * stride] = h[0][j];
                u[(4 + j) * stride] = 0.5f * (h[0][j] + h[1][j] + h[2][j]);
                u[(8 + j) * stride] = 0.5f * (h[0][j] - h[1][j] + h[2][j]);
                u[(12 + j) * stride] = h[2][j];
            }
        }
}

// dweight[oc, :, :, c] += G^T dU G, dU (16, OC, C).
void filter_grad_transform(float* dweight, const float* dU, const ConvShape& s) {
    const size_t C = static_cast<size_t>(s.C), OC = static_cast<size_t>(s.OC), stride = OC * C;
    for (size_t o = 0; o < OC; o++)
        for (size_t c = 0; c < C; c++) {
            const float* u = dU + o * C + c;
            float h[3][4];  // G^T along the row index i, per column j
            for (int j = 0; j < 4; j++) {
                const float u0 = u[j * stride], u1 = u[(4 + j) * stride], u2 = u[(8 + j) * stride];
                const float u3 = u[(12 + j) * stride];
                h[0][j] = u0 + 0.5f * (u1 + u2);
                h[1][j] = 0.5f * (u1 - u2);
                h[2][j] = 0.5f * (u1 + u2) + u3;
            }
            float* g = dweight + o * 9 * C + c;
            for (int kh = 0; kh < 3; kh++) {
                g[(3 * kh) * C] += h[kh][0] + 0.5f * (h[kh][1] + h[kh][2]);
                g[(3 * kh + 1) * C] += 0.5f * (h[kh][1] - h[kh][2]);
                g[(3 * kh + 2) * C] += 0.5f * (h[kh][1] + h[kh][2]) + h[kh][3];
            }
        }
}

// C = op(A) op(B) (beta 0) on the calling thread: oneDNN's sgemm inside a parallel region runs on it alone;
// outside one (the OpenBLAS backend: sgemm_serial_available() false, the chunks run in turn) it is the process's
// sgemm.
void chunk_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                int64_t ldb, float* C, int64_t ldc) {
    if (!sgemm_serial(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc))
        sgemm(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
}

size_t saved_offset(const Chunk& ch, const Tiling& tl, const ConvShape& s) {
    return static_cast<size_t>(ch.b0) * tl.per_image * kPoints * static_cast<size_t>(s.C);
}

}  // namespace

bool winograd_applies(const ConvShape& s) {
    return s.g.kh == 3 && s.g.kw == 3 && s.g.stride == 1 && s.g.pad == 1 && s.H >= 2 && s.W >= 2 && s.C >= 8 &&
           matmul_precision() == MatmulPrecision::kF32;
}

size_t winograd_saved_floats(const ConvShape& s) {
    const Tiling tl(s);
    return static_cast<size_t>(s.B) * tl.per_image * kPoints * static_cast<size_t>(s.C);
}

void conv2d_winograd_forward(float* out, float* saved, const float* inp, const float* weight, const float* bias,
                             const ConvShape& s) {
    const Tiling tl(s);
    const size_t C = static_cast<size_t>(s.C), OC = static_cast<size_t>(s.OC);
    std::vector<float> U(kPoints * OC * C), zeros(std::max(C, OC), 0.0f);
    filter_transform(U.data(), weight, s);
    const float* b = bias ? bias : zeros.data();
#pragma omp parallel for schedule(static) if (sgemm_serial_available())
    for (int k = 0; k < tl.chunks; k++) {
        const Chunk ch = chunk_of(tl, k, s.B);
        float* V = saved + saved_offset(ch, tl, s);
        float* M = thread_scratch(kPoints * ch.tiles * OC + OC);
        float* trash = M + kPoints * ch.tiles * OC;
        input_transform(V, inp, ch, s, tl, zeros.data());
        for (int p = 0; p < kPoints; p++)
            chunk_gemm(false, true, static_cast<int64_t>(ch.tiles), s.OC, s.C, V + p * ch.tiles * C, s.C,
                       U.data() + p * OC * C, s.C, M + p * ch.tiles * OC, s.OC);
        output_transform(out, M, b, ch, s, tl, trash);
    }
}

void conv2d_winograd_backward(float* dinp, float* dweight, float* dbias, const float* dout, float* saved,
                              const float* weight, const ConvShape& s) {
    const Tiling tl(s);
    const size_t C = static_cast<size_t>(s.C), OC = static_cast<size_t>(s.OC), per_chunk = kPoints * OC * C;
    if (dbias) matmul_backward(nullptr, nullptr, dbias, dout, nullptr, nullptr, s.B * s.H * s.W, 0, s.OC);
    if (!dweight && !dinp) return;
    std::vector<float> U(per_chunk), dU_parts(dweight ? tl.chunks * per_chunk : 0), zeros(OC, 0.0f);
    if (dinp) filter_transform(U.data(), weight, s);
#pragma omp parallel for schedule(static) if (sgemm_serial_available())
    for (int k = 0; k < tl.chunks; k++) {
        const Chunk ch = chunk_of(tl, k, s.B);
        float* V = saved + saved_offset(ch, tl, s);
        float* dM = thread_scratch(kPoints * ch.tiles * OC + C);
        float* trash = dM + kPoints * ch.tiles * OC;
        const auto n = static_cast<int64_t>(ch.tiles);
        output_grad_transform(dM, dout, ch, s, tl, zeros.data());
        for (int p = 0; p < kPoints && dweight; p++)  // dU_p = dM_p^T V_p, this chunk's share
            chunk_gemm(true, false, s.OC, s.C, n, dM + p * ch.tiles * OC, s.OC, V + p * ch.tiles * C, s.C,
                       dU_parts.data() + k * per_chunk + p * OC * C, s.C);
        if (!dinp) continue;
        for (int p = 0; p < kPoints; p++)  // dV_p = dM_p U_p, over V (read above)
            chunk_gemm(false, false, n, s.C, s.OC, dM + p * ch.tiles * OC, s.OC, U.data() + p * OC * C, s.C,
                       V + p * ch.tiles * C, s.C);
        input_grad_transform(dinp, V, ch, s, tl, trash);
    }
    if (!dweight) return;
    // The chunks' partials summed in chunk order (the same for every thread count).
    for (int k = 1; k < tl.chunks; k++) {
        const float* part = dU_parts.data() + k * per_chunk;
#pragma omp simd
        for (size_t i = 0; i < per_chunk; i++) dU_parts[i] += part[i];
    }
    filter_grad_transform(dweight, dU_parts.data(), s);
}

}  // namespace llmt::kernels::cpu
