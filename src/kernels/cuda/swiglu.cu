// SwiGLU on CUDA (cuda/swiglu.h): grid-stride loops, 16 bytes of gate and of up per thread where F is a
// multiple of 16 bytes (8 bf16 / 4 fp32) and the buffers are 16-byte aligned, one element otherwise.
// Accurate expf (not __expf), so fp32 results track the CPU kernel's libm exp to a few ulp.
#include <cstdint>

#include "kernels/cuda/chunk.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/swiglu.h"

namespace llmt::kernels::cuda {
namespace {

constexpr int kBlock = 256;

#define LLMT_GRID_STRIDE(i, n)                                                       \
    for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < (n); \
         i += static_cast<long>(gridDim.x) * blockDim.x)

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// V elements per thread (V = 16 / sizeof(T) with 16-byte accesses, or 1). F % V == 0.
template <typename T, int V>
__global__ void swiglu_forward_kernel(T* out, const T* inp, long n_chunks, int F) {
    const int per_row = F / V;
    LLMT_GRID_STRIDE(i, n_chunks) {
        const long r = i / per_row, j = (i % per_row) * V;
        const T* g = inp + r * 2 * F + j;
        const Chunk<T, V> gc = load_chunk<T, V>(g), uc = load_chunk<T, V>(g + F);
        Chunk<T, V> o;
#pragma unroll
        for (int q = 0; q < V; q++) {
            const float x = ldf(gc.e[q]);
            o.e[q] = cvt<T>(x * sigmoid(x) * ldf(uc.e[q]));
        }
        store_chunk<T, V>(out + r * F + j, o);
    }
}

// Reads gate, up and dout before writing, so dinp may alias inp.
template <typename T, int V>
__global__ void swiglu_backward_kernel(T* dinp, const T* dout, const T* inp, long n_chunks, int F) {
    const int per_row = F / V;
    LLMT_GRID_STRIDE(i, n_chunks) {
        const long r = i / per_row, j = (i % per_row) * V;
        const T* g = inp + r * 2 * F + j;
        const Chunk<T, V> gc = load_chunk<T, V>(g), uc = load_chunk<T, V>(g + F);
        const Chunk<T, V> dc = load_chunk<T, V>(dout + r * F + j);
        Chunk<T, V> dg, du;
#pragma unroll
        for (int q = 0; q < V; q++) {
            const float x = ldf(gc.e[q]), u = ldf(uc.e[q]), dy = ldf(dc.e[q]);
            const float s = sigmoid(x);
            dg.e[q] = cvt<T>(dy * u * s * (1.0f + x * (1.0f - s)));  // silu'(x) = s (1 + x (1 - s))
            du.e[q] = cvt<T>(dy * (x * s));
        }
        T* d = dinp + r * 2 * F + j;
        store_chunk<T, V>(d, dg);
        store_chunk<T, V>(d + F, du);
    }
}

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <typename T>
void forward_t(T* out, const T* inp, size_t N, int F, cudaStream_t stream) {
    constexpr int V = 16 / sizeof(T);
    if (F % V == 0 && aligned16(out) && aligned16(inp)) {
        const long n = static_cast<long>(N) * (F / V);
        swiglu_forward_kernel<T, V><<<grid_for(n, kBlock), kBlock, 0, stream>>>(out, inp, n, F);
    } else {
        const long n = static_cast<long>(N) * F;
        swiglu_forward_kernel<T, 1><<<grid_for(n, kBlock), kBlock, 0, stream>>>(out, inp, n, F);
    }
    LLMT_CUDA_CHECK_LAUNCH("swiglu_forward_kernel");
}

template <typename T>
void backward_t(T* dinp, const T* dout, const T* inp, size_t N, int F, cudaStream_t stream) {
    constexpr int V = 16 / sizeof(T);
    if (F % V == 0 && aligned16(dinp) && aligned16(dout) && aligned16(inp)) {
        const long n = static_cast<long>(N) * (F / V);
        swiglu_backward_kernel<T, V><<<grid_for(n, kBlock), kBlock, 0, stream>>>(dinp, dout, inp, n, F);
    } else {
        const long n = static_cast<long>(N) * F;
        swiglu_backward_kernel<T, 1><<<grid_for(n, kBlock), kBlock, 0, stream>>>(dinp, dout, inp, n, F);
    }
    LLMT_CUDA_CHECK_LAUNCH("swiglu_backward_kernel");
}

}  // namespace

#define LLMT_SWIGLU_FOR(T)                                                                                   \
    void swiglu_forward(T* out, const T* inp, size_t N, int F, cudaStream_t s) { forward_t(out, inp, N, F, s); } \
    void swiglu_backward(T* dinp, const T* dout, const T* inp, size_t N, int F, cudaStream_t s) {             \
        backward_t(dinp, dout, inp, N, F, s);                                                                \
    }
LLMT_SWIGLU_FOR(float)
LLMT_SWIGLU_FOR(bf16)
#undef LLMT_SWIGLU_FOR

}  // namespace llmt::kernels::cuda
