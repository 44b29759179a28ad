// Image ops on CUDA (cuda/conv.h): im2col / col2im and max pooling as one thread per element, the GEMMs on
// cuBLASLt through cuda/matmul.h, ReLU as grid-stride loops. Templated on the storage type (fp32 or bf16).
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/conv.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/runtime.h"

namespace llmt::kernels::cuda {
namespace {

constexpr int kBlock = 256;

#define LLMT_GRID_STRIDE(i, n) LLMT_GRID_STRIDE_T(long, i, n)
#define LLMT_GRID_STRIDE_T(I, i, n)                                            \
    for (I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; i < (n); \
         i += static_cast<I>(gridDim.x) * blockDim.x)

// Whether every index below `extent` (and the grid-stride step past it) fits an int.
bool fits_int(long extent) { return extent + 65536L * 8 * 256 < 2147483647L; }

// cols[r, (kh*KW + kw)*C + c] = inp[b, oh*s - pad + kh, ow*s - pad + kw, c] (0 outside), r = (b*OH + oh)*OW + ow.
// I: the index type, int where every index of the op fits (32-bit division is several times cheaper than
// 64-bit on the GPU: with long indices the divisions dominated these memory-bound kernels), else long.
template <typename T, typename I>
__global__ void im2col_kernel(T* cols, const T* inp, ConvShape s, I n) {
    const I K = s.g.kh * s.g.kw * s.C;
    LLMT_GRID_STRIDE_T(I, i, n) {
        const I r = i / K;
        const int k = static_cast<int>(i - r * K);
        const int c = k % s.C, tap = k / s.C, kw = tap % s.g.kw, kh = tap / s.g.kw;
        const int ow = static_cast<int>(r % s.OW);
        const I bo = r / s.OW;
        const int oh = static_cast<int>(bo % s.OH);
        const I b = bo / s.OH;
        const int ih = oh * s.g.stride - s.g.pad + kh, iw = ow * s.g.stride - s.g.pad + kw;
        T v = cvt<T>(0.0f);
        if (ih >= 0 && ih < s.H && iw >= 0 && iw < s.W) v = inp[((b * s.H + ih) * s.W + iw) * s.C + c];
        cols[i] = v;
    }
}

// dinp[b, ih, iw, c] = sum of the cols entries that read it, summed in fp32 in (kh, kw) order.
template <typename T, typename I>
__global__ void col2im_kernel(T* dinp, const T* cols, ConvShape s, I n) {
    const I K = s.g.kh * s.g.kw * s.C;
    LLMT_GRID_STRIDE_T(I, i, n) {
        const int c = static_cast<int>(i % s.C);
        const I p = i / s.C;
        const int iw = static_cast<int>(p % s.W);
        const I q = p / s.W;
        const int ih = static_cast<int>(q % s.H);
        const I b = q / s.H;
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
template <typename T, typename I>
__global__ void maxpool_forward_kernel(T* out, int32_t* argmax, const T* inp, PoolShape s, I n) {
    LLMT_GRID_STRIDE_T(I, i, n) {
        const int c = static_cast<int>(i % s.C);
        const I p = i / s.C;
        const int ow = static_cast<int>(p % s.OW);
        const I q = p / s.OW;
        const int oh = static_cast<int>(q % s.OH);
        const I b = q / s.OH;
        const T* img = inp + b * s.H * s.W * static_cast<I>(s.C) + c;
        float best = 0.0f;
        int32_t arg = -1;
        for (int kh = 0; kh < s.k; kh++)
            for (int kw = 0; kw < s.k; kw++) {
                const int32_t idx = (oh * s.stride + kh) * s.W + (ow * s.stride + kw);
                pool_take(ldf(img[static_cast<I>(idx) * s.C]), idx, best, arg);
            }
        out[i] = cvt<T>(best);
        argmax[i] = arg;
    }
}

// One thread per input element: the sum of dout over the windows that cover it and chose it.
template <typename T, typename I>
__global__ void maxpool_backward_kernel(T* dinp, const T* dout, const int32_t* argmax, PoolShape s, I n) {
    LLMT_GRID_STRIDE_T(I, i, n) {
        const int c = static_cast<int>(i % s.C);
        const I p = i / s.C;
        const int32_t idx = static_cast<int32_t>(p % (static_cast<I>(s.H) * s.W));
        const I b = p / (static_cast<I>(s.H) * s.W);
        const int ih = idx / s.W, iw = idx % s.W;
        // windows oh with oh*stride <= ih < oh*stride + k
        const int oh0 = ih >= s.k ? (ih - s.k) / s.stride + 1 : 0, oh1 = min(ih / s.stride, s.OH - 1);
        const int ow0 = iw >= s.k ? (iw - s.k) / s.stride + 1 : 0, ow1 = min(iw / s.stride, s.OW - 1);
        float acc = 0.0f;
        for (int oh = oh0; oh <= oh1; oh++)
            for (int ow = ow0; ow <= ow1; ow++) {
                const I o = ((b * s.OH + oh) * s.OW + ow) * s.C + c;
                if (argmax[o] == idx) acc += ldf(dout[o]);
            }
        dinp[i] = cvt<T>(acc);
    }
}

// fp32 with C % 4 == 0 and 16-byte-aligned buffers (NHWC's channel runs): the same four kernels on float4
// units of 4 channels, so the index arithmetic is done once per 4 elements and every access is 16 bytes
// (the scalar kernels above are the fallback: bf16, C = 1 or 3).
template <typename I>
__global__ void im2col_vec4_kernel(float4* cols, const float4* inp, ConvShape s, I n) {
    const int C4 = s.C / 4;
    const I K4 = s.g.kh * s.g.kw * C4;
    LLMT_GRID_STRIDE_T(I, i, n) {
        const I r = i / K4;
        const int k = static_cast<int>(i - r * K4);
        const int c4 = k % C4, tap = k / C4, kw = tap % s.g.kw, kh = tap / s.g.kw;
        const int ow = static_cast<int>(r % s.OW);
        const I bo = r / s.OW;
        const int oh = static_cast<int>(bo % s.OH);
        const I b = bo / s.OH;
        const int ih = oh * s.g.stride - s.g.pad + kh, iw = ow * s.g.stride - s.g.pad + kw;
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (ih >= 0 && ih < s.H && iw >= 0 && iw < s.W) v = inp[((b * s.H + ih) * s.W + iw) * C4 + c4];
        cols[i] = v;
    }
}

template <typename I>
__global__ void col2im_vec4_kernel(float4* dinp, const float4* cols, ConvShape s, I n) {
    const int C4 = s.C / 4;
    const I K4 = s.g.kh * s.g.kw * C4;
    LLMT_GRID_STRIDE_T(I, i, n) {
        const int c4 = static_cast<int>(i % C4);
        const I p = i / C4;
        const int iw = static_cast<int>(p % s.W);
        const I q = p / s.W;
        const int ih = static_cast<int>(q % s.H);
        const I b = q / s.H;
        float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
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
                const float4 v = cols[((b * s.OH + oh) * s.OW + ow) * K4 + (kh * s.g.kw + kw) * C4 + c4];
                acc.x += v.x, acc.y += v.y, acc.z += v.z, acc.w += v.w;
            }
        }
        dinp[i] = acc;
    }
}

template <typename I>
__global__ void maxpool_forward_vec4_kernel(float4* out, int4* argmax, const float4* inp, PoolShape s, I n) {
    const int C4 = s.C / 4;
    LLMT_GRID_STRIDE_T(I, i, n) {
        const int c4 = static_cast<int>(i % C4);
        const I p = i / C4;
        const int ow = static_cast<int>(p % s.OW);
        const I q = p / s.OW;
        const int oh = static_cast<int>(q % s.OH);
        const I b = q / s.OH;
        const float4* img = inp + b * s.H * s.W * static_cast<I>(C4) + c4;
        float4 best = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        int4 arg = make_int4(-1, -1, -1, -1);
        for (int kh = 0; kh < s.k; kh++)
            for (int kw = 0; kw < s.k; kw++) {
                const int32_t idx = (oh * s.stride + kh) * s.W + (ow * s.stride + kw);
                const float4 v = img[static_cast<I>(idx) * C4];
                pool_take(v.x, idx, best.x, arg.x);
                pool_take(v.y, idx, best.y, arg.y);
                pool_take(v.z, idx, best.z, arg.z);
                pool_take(v.w, idx, best.w, arg.w);
            }
        out[i] = best;
        argmax[i] = arg;
    }
}

template <typename I>
__global__ void maxpool_backward_vec4_kernel(float4* dinp, const float4* dout, const int4* argmax, PoolShape s, I n) {
    const int C4 = s.C / 4;
    LLMT_GRID_STRIDE_T(I, i, n) {
        const int c4 = static_cast<int>(i % C4);
        const I p = i / C4;
        const int32_t idx = static_cast<int32_t>(p % (static_cast<I>(s.H) * s.W));
        const I b = p / (static_cast<I>(s.H) * s.W);
        const int ih = idx / s.W, iw = idx % s.W;
        const int oh0 = ih >= s.k ? (ih - s.k) / s.stride + 1 : 0, oh1 = min(ih / s.stride, s.OH - 1);
        const int ow0 = iw >= s.k ? (iw - s.k) / s.stride + 1 : 0, ow1 = min(iw / s.stride, s.OW - 1);
        float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        for (int oh = oh0; oh <= oh1; oh++)
            for (int ow = ow0; ow <= ow1; ow++) {
                const I o = ((b * s.OH + oh) * s.OW + ow) * C4 + c4;
                const int4 a = argmax[o];
                const float4 d = dout[o];
                if (a.x == idx) acc.x += d.x;
                if (a.y == idx) acc.y += d.y;
                if (a.z == idx) acc.z += d.z;
                if (a.w == idx) acc.w += d.w;
            }
        dinp[i] = acc;
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

// Launches kernel<T, int> when every index up to `extent` fits an int, else kernel<T, long>, over n threads.
#define LLMT_LAUNCH_INDEXED(kernel, T, n, extent, stream, ...)                                              \
    do {                                                                                                  \
        if (fits_int(extent))                                                                             \
            kernel<T, int><<<grid_for(n, kBlock), kBlock, 0, stream>>>(__VA_ARGS__, static_cast<int>(n)); \
        else                                                                                              \
            kernel<T, long><<<grid_for(n, kBlock), kBlock, 0, stream>>>(__VA_ARGS__, static_cast<long>(n)); \
        LLMT_CUDA_CHECK_LAUNCH(#kernel);                                                                  \
    } while (0)

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
// Whether the float4 kernels apply: fp32 storage, whole float4 channel runs, 16-byte-aligned buffers.
template <typename T>
bool vec4(int C, std::initializer_list<const void*> ptrs) {
    if constexpr (!std::is_same_v<T, float>) {
        return false;
    } else {
        bool ok = C % 4 == 0;
        for (const void* p : ptrs) ok = ok && aligned16(p);
        return ok;
    }
}

// Launches kernel<I> (I = int or long, as LLMT_LAUNCH_INDEXED) over n float4 units.
#define LLMT_LAUNCH_VEC4(kernel, n, extent, stream, ...)                                                     \
    do {                                                                                                  \
        if (fits_int(extent))                                                                             \
            kernel<int><<<grid_for(n, kBlock), kBlock, 0, stream>>>(__VA_ARGS__, static_cast<int>(n));    \
        else                                                                                              \
            kernel<long><<<grid_for(n, kBlock), kBlock, 0, stream>>>(__VA_ARGS__, static_cast<long>(n));  \
        LLMT_CUDA_CHECK_LAUNCH(#kernel);                                                                  \
    } while (0)

template <typename T>
void im2col(T* cols, const T* inp, const ConvShape& s, cudaStream_t stream) {
    const long n = rows_of(s) * kdim(s), extent = std::max(n, static_cast<long>(s.B) * s.H * s.W * s.C);
    if (vec4<T>(s.C, {cols, inp}))
        LLMT_LAUNCH_VEC4(im2col_vec4_kernel, n / 4, extent, stream, reinterpret_cast<float4*>(cols),
                         reinterpret_cast<const float4*>(inp), s);
    else
        LLMT_LAUNCH_INDEXED(im2col_kernel, T, n, extent, stream, cols, inp, s);
}

template <typename T>
void col2im(T* dinp, const T* cols, const ConvShape& s, cudaStream_t stream) {
    const long n = static_cast<long>(s.B) * s.H * s.W * s.C, extent = std::max(n, rows_of(s) * kdim(s));
    if (vec4<T>(s.C, {dinp, cols}))
        LLMT_LAUNCH_VEC4(col2im_vec4_kernel, n / 4, extent, stream, reinterpret_cast<float4*>(dinp),
                         reinterpret_cast<const float4*>(cols), s);
    else
        LLMT_LAUNCH_INDEXED(col2im_kernel, T, n, extent, stream, dinp, cols, s);
}

template <typename T>
void maxpool_forward(T* out, int32_t* argmax, const T* inp, const PoolShape& s, cudaStream_t stream) {
    const long n = static_cast<long>(s.B) * s.OH * s.OW * s.C, extent = static_cast<long>(s.B) * s.H * s.W * s.C;
    if (vec4<T>(s.C, {out, argmax, inp}))
        LLMT_LAUNCH_VEC4(maxpool_forward_vec4_kernel, n / 4, std::max(n, extent), stream,
                         reinterpret_cast<float4*>(out), reinterpret_cast<int4*>(argmax),
                         reinterpret_cast<const float4*>(inp), s);
    else
        LLMT_LAUNCH_INDEXED(maxpool_forward_kernel, T, n, std::max(n, extent), stream, out, argmax, inp, s);
}

template <typename T>
void maxpool_backward(T* dinp, const T* dout, const int32_t* argmax, const PoolShape& s, cudaStream_t stream) {
    const long n = static_cast<long>(s.B) * s.H * s.W * s.C;
    if (vec4<T>(s.C, {dinp, dout, argmax}))
        LLMT_LAUNCH_VEC4(maxpool_backward_vec4_kernel, n / 4, n, stream, reinterpret_cast<float4*>(dinp),
                         reinterpret_cast<const float4*>(dout), reinterpret_cast<const int4*>(argmax), s);
    else
        LLMT_LAUNCH_INDEXED(maxpool_backward_kernel, T, n, n, stream, dinp, dout, argmax, s);
}

template <typename T>
void conv2d_forward_t(T* out, T* cols, const T* inp, const T* weight, const T* bias, const ConvShape& s,
                      cudaStream_t stream, bool tf32) {
    im2col(cols, inp, s, stream);
    if constexpr (std::is_same_v<T, float>)
        matmul_forward(out, cols, weight, bias, static_cast<int>(rows_of(s)), kdim(s), s.OC, stream, nullptr, tf32);
    else
        matmul_forward(out, cols, weight, bias, static_cast<int>(rows_of(s)), kdim(s), s.OC, stream);
}

template <typename T>
void conv2d_backward_t(T* dinp, float* dweight, float* dbias, const T* dout, T* cols, const T* weight,
                       const ConvShape& s, cudaStream_t stream, bool tf32) {
    const int rows = static_cast<int>(rows_of(s)), K = kdim(s);
    if (dbias) add_column_sums(dbias, dout, rows, s.OC, stream);
    if (dweight) gemm<T, float>(true, false, s.OC, K, rows, 1.0f, dout, s.OC, cols, K, 1.0f, dweight, K, stream, tf32);
    if (!dinp) return;
    gemm<T, T>(false, false, rows, K, s.OC, 1.0f, dout, s.OC, weight, K, 0.0f, cols, K, stream, tf32);
    col2im(dinp, cols, s, stream);
}

}  // namespace

#define LLMT_CONV_FOR(T)                                                                                          \
    void conv2d_forward(T* out, T* cols, const T* inp, const T* weight, const T* bias, const ConvShape& s,          \
                        cudaStream_t stream, bool tf32) {                                                         \
        conv2d_forward_t(out, cols, inp, weight, bias, s, stream, tf32);                                          \
    }                                                                                                             \
    void conv2d_backward(T* dinp, float* dweight, float* dbias, const T* dout, T* cols, const T* weight,            \
                         const ConvShape& s, cudaStream_t stream, bool tf32) {                                    \
        conv2d_backward_t(dinp, dweight, dbias, dout, cols, weight, s, stream, tf32);                             \
    }                                                                                                             \
    void conv2d_im2col(T* cols, const T* inp, const ConvShape& s, cudaStream_t stream) {                          \
        im2col(cols, inp, s, stream);                                                                             \
    }                                                                                                             \
    void maxpool2d_forward(T* out, int32_t* argmax, const T* inp, const PoolShape& s, cudaStream_t stream) {       \
        maxpool_forward(out, argmax, inp, s, stream);                                                             \
    }                                                                                                             \
    void maxpool2d_backward(T* dinp, const T* dout, const int32_t* argmax, const PoolShape& s,                    \
                            cudaStream_t stream) {                                                                \
        maxpool_backward(dinp, dout, argmax, s, stream);                                                          \
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
