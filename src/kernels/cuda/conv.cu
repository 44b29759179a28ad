// Image ops on CUDA (cuda/conv.h): im2col / col2im and max pooling as one thread per element, the GEMMs on
// cuBLASLt through cuda/matmul.h, ReLU as grid-stride loops. Templated on the storage type (fp32 or bf16).
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/conv.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/runtime.h"

namespace llmt::kernels::cuda {
namespace {

constexpr int kBlock = 256;

#define LLMT_GRID_STRIDE(i, n) \
    for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < (n); i += static_cast<long>(gridDim.x) * blockDim.x)

// cols[r, (kh*KW + kw)*C + c] = inp[b, oh*s - pad + kh, ow*s - pad + kw, c] (0 outside), r = (b*OH + oh)*OW + ow.
template <typename T>
__global__ void im2col_kernel(T* cols, const T* inp, ConvShape s, long n) {
    const int K = s.g.kh * s.g.kw * s.C;
    LLMT_GRID_STRIDE(i, n) {
        const long r = i / K;
        const int k = static_cast<int>(i - r * K);
        const int c = k % s.C, tap = k / s.C, kw = tap % s.g.kw, kh = tap / s.g.kw;
        const int ow = static_cast<int>(r % s.OW);
        const long bo = r / s.OW;
        const int oh = static_cast<int>(bo % s.OH);
        const long b = bo / s.OH;
        const int ih = oh * s.g.stride - s.g.pad + kh, iw = ow * s.g.stride - s.g.pad + kw;
        T v = cvt<T>(0.0f);
        if (ih >= 0 && ih < s.H && iw >= 0 && iw < s.W) v = inp[((b * s.H + ih) * s.W + iw) * s.C + c];
        cols[i] = v;
    }
}

// dinp[b, ih, iw, c] = sum of the cols entries that read it, summed in fp32 in (kh, kw) order.
template <typename T>
__global__ void col2im_kernel(T* dinp, const T* cols, ConvShape s, long n) {
    const int K = s.g.kh * s.g.kw * s.C;
    LLMT_GRID_STRIDE(i, n) {
        const int c = static_cast<int>(i % s.C);
        const long p = i / s.C;
        const int iw = static_cast<int>(p % s.W);
        const long q = p / s.W;
        const int ih = static_cast<int>(q % s.H);
        const long b = q / s.H;
        float acc = 0.0f;
        for (int kh = 0; kh < s.g.kh; kh++) {
            const int th = ih + s.g.pad - kh;
            if (th < 0 || th % s.g.stride) continue;
            const int oh = th / s.g.stride;
            if (oh >= s.OH) continue;
            for (int kw = 0; kw < s.g.kw; kw++) {
                const int tw = iw + s.g.pad - kw;
                if (tw < 0 || tw % s.g.stride) continue;
                const int ow = tw / s.g.stride;
                if (ow >= s.OW) continue;
                acc += ldf(cols[((b * s.OH + oh) * s.OW + ow) * K + (kh * s.g.kw + kw) * s.C + c]);
            }
        }
        dinp[i] = cvt<T>(acc);
    }
}

// One thread per output element; first maximum in window order, NaN wins (as the CPU kernel and torch).
template <typename T>
__global__ void maxpool_forward_kernel(T* out, int32_t* argmax, const T* inp, PoolShape s, long n) {
    LLMT_GRID_STRIDE(i, n) {
        const int c = static_cast<int>(i % s.C);
        const long p = i / s.C;
        const int ow = static_cast<int>(p % s.OW);
        const long q = p / s.OW;
        const int oh = static_cast<int>(q % s.OH);
        const long b = q / s.OH;
        const T* img = inp + b * s.H * s.W * static_cast<long>(s.C) + c;
        float best = 0.0f;
        int32_t arg = -1;
        for (int kh = 0; kh < s.k; kh++)
            for (int kw = 0; kw < s.k; kw++) {
                const int32_t idx = (oh * s.stride + kh) * s.W + (ow * s.stride + kw);
                const float v = ldf(img[static_cast<long>(idx) * s.C]);
                if (arg < 0 || v > best || (isnan(v) && !isnan(best))) {
                    best = v;
                    arg = idx;
                }
            }
        out[i] = cvt<T>(best);
        argmax[i] = arg;
    }
}

// One thread per input element: the sum of dout over the windows that cover it and chose it.
template <typename T>
__global__ void maxpool_backward_kernel(T* dinp, const T* dout, const int32_t* argmax, PoolShape s, long n) {
    LLMT_GRID_STRIDE(i, n) {
        const int c = static_cast<int>(i % s.C);
        const long p = i / s.C;
        const int32_t idx = static_cast<int32_t>(p % (static_cast<long>(s.H) * s.W));
        const long b = p / (static_cast<long>(s.H) * s.W);
        const int ih = idx / s.W, iw = idx % s.W;
        // windows oh with oh*stride <= ih < oh*stride + k
        const int oh0 = ih >= s.k ? (ih - s.k) / s.stride + 1 : 0, oh1 = min(ih / s.stride, s.OH - 1);
        const int ow0 = iw >= s.k ? (iw - s.k) / s.stride + 1 : 0, ow1 = min(iw / s.stride, s.OW - 1);
        float acc = 0.0f;
        for (int oh = oh0; oh <= oh1; oh++)
            for (int ow = ow0; ow <= ow1; ow++) {
                const long o = ((b * s.OH + oh) * s.OW + ow) * s.C + c;
                if (argmax[o] == idx) acc += ldf(dout[o]);
            }
        dinp[i] = cvt<T>(acc);
    }
}

template <typename T>
__global__ void relu_forward_kernel(T* out, const T* inp, long n) {
    LLMT_GRID_STRIDE(i, n) {
        const float x = ldf(inp[i]);
        out[i] = cvt<T>(x < 0.0f ? 0.0f : x);
    }
}

template <typename T>
__global__ void relu_backward_kernel(T* dinp, const T* dout, const T* out, long n) {
    LLMT_GRID_STRIDE(i, n) dinp[i] = ldf(out[i]) > 0.0f ? dout[i] : cvt<T>(0.0f);
}

long rows_of(const ConvShape& s) { return static_cast<long>(s.B) * s.OH * s.OW; }
int kdim(const ConvShape& s) { return s.g.kh * s.g.kw * s.C; }

template <typename T>
void conv2d_forward_t(T* out, T* cols, const T* inp, const T* weight, const T* bias, const ConvShape& s,
                      cudaStream_t stream) {
    const long n = rows_of(s) * kdim(s);
    im2col_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(cols, inp, s, n);
    LLMT_CUDA_CHECK_LAUNCH("im2col_kernel");
    matmul_forward(out, cols, weight, bias, static_cast<int>(rows_of(s)), kdim(s), s.OC, stream);
}

template <typename T>
void conv2d_backward_t(T* dinp, float* dweight, float* dbias, const T* dout, T* cols, const T* weight,
                       const ConvShape& s, cudaStream_t stream) {
    const int rows = static_cast<int>(rows_of(s)), K = kdim(s);
    if (dbias) add_column_sums(dbias, dout, rows, s.OC, stream);
    if (dweight) gemm<T, float>(true, false, s.OC, K, rows, 1.0f, dout, s.OC, cols, K, 1.0f, dweight, K, stream);
    if (!dinp) return;
    gemm<T, T>(false, false, rows, K, s.OC, 1.0f, dout, s.OC, weight, K, 0.0f, cols, K, stream);
    const long n = static_cast<long>(s.B) * s.H * s.W * s.C;
    col2im_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(dinp, cols, s, n);
    LLMT_CUDA_CHECK_LAUNCH("col2im_kernel");
}

}  // namespace

#define LLMT_CONV_FOR(T)                                                                                          \
    void conv2d_forward(T* out, T* cols, const T* inp, const T* weight, const T* bias, const ConvShape& s,          \
                        cudaStream_t stream) {                                                                    \
        conv2d_forward_t(out, cols, inp, weight, bias, s, stream);                                                \
    }                                                                                                             \
    void conv2d_backward(T* dinp, float* dweight, float* dbias, const T* dout, T* cols, const T* weight,            \
                         const ConvShape& s, cudaStream_t stream) {                                               \
        conv2d_backward_t(dinp, dweight, dbias, dout, cols, weight, s, stream);                                   \
    }                                                                                                             \
    void maxpool2d_forward(T* out, int32_t* argmax, const T* inp, const PoolShape& s, cudaStream_t stream) {       \
        const long n = static_cast<long>(s.B) * s.OH * s.OW * s.C;                                                \
        maxpool_forward_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(out, argmax, inp, s, n);               \
        LLMT_CUDA_CHECK_LAUNCH("maxpool_forward_kernel");                                                         \
    }                                                                                                             \
    void maxpool2d_backward(T* dinp, const T* dout, const int32_t* argmax, const PoolShape& s,                    \
                            cudaStream_t stream) {                                                                \
        const long n = static_cast<long>(s.B) * s.H * s.W * s.C;                                                  \
        maxpool_backward_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(dinp, dout, argmax, s, n);            \
        LLMT_CUDA_CHECK_LAUNCH("maxpool_backward_kernel");                                                        \
    }                                                                                                             \
    void relu_forward(T* out, const T* inp, size_t N, cudaStream_t stream) {                                      \
        const long n = static_cast<long>(N);                                                                      \
        relu_forward_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(out, inp, n);                             \
        LLMT_CUDA_CHECK_LAUNCH("relu_forward_kernel");                                                            \
    }                                                                                                             \
    void relu_backward(T* dinp, const T* dout, const T* out, size_t N, cudaStream_t stream) {                     \
        const long n = static_cast<long>(N);                                                                      \
        relu_backward_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(dinp, dout, out, n);                     \
        LLMT_CUDA_CHECK_LAUNCH("relu_backward_kernel");                                                           \
    }
LLMT_CONV_FOR(float)
LLMT_CONV_FOR(bf16)
#undef LLMT_CONV_FOR

}  // namespace llmt::kernels::cuda
