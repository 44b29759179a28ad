// Element-wise ops on CUDA (cuda/elementwise.h): grid-stride loops templated on the storage type (fp32
// or bf16; arithmetic in fp32), accurate tanhf/expf so fp32 results track the CPU kernels to a few ulp.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/runtime.h"

namespace llmt::kernels::cuda {
namespace {

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluCube = 0.044715f;
constexpr int kBlock = 256;

#define LLMT_GRID_STRIDE(i, n)                                                       \
    for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < (n); \
         i += static_cast<long>(gridDim.x) * blockDim.x)

template <typename T>
__global__ void gelu_forward_kernel(T* out, const T* inp, long n) {
    LLMT_GRID_STRIDE(i, n) {
        const float x = ldf(inp[i]);
        out[i] = cvt<T>(0.5f * x * (1.0f + tanhf(kGeluScale * (x + kGeluCube * x * x * x))));
    }
}

template <typename T>
__global__ void gelu_backward_kernel(T* dinp, const T* inp, const T* dout, long n) {
    LLMT_GRID_STRIDE(i, n) {
        const float x = ldf(inp[i]);
        const float t = tanhf(kGeluScale * (x + kGeluCube * x * x * x));
        const float sech2 = 1.0f - t * t;
        const float g = 0.5f * (1.0f + t) + 0.5f * x * sech2 * kGeluScale * (1.0f + 3.0f * kGeluCube * x * x);
        dinp[i] = cvt<T>(g * ldf(dout[i]));
    }
}

template <typename T>
__global__ void residual_forward_kernel(T* out, const T* a, const T* b, long n) {
    LLMT_GRID_STRIDE(i, n) out[i] = cvt<T>(ldf(a[i]) + ldf(b[i]));
}

// bf16 with N % 8 == 0 and 16-byte aligned pointers: 8 elements per 16-byte load.
__global__ void residual_forward_bf16x8_kernel(uint4* out, const uint4* a, const uint4* b, long n8) {
    LLMT_GRID_STRIDE(i, n8) {
        const uint4 va = a[i], vb = b[i];
        const bf16* ea = reinterpret_cast<const bf16*>(&va);
        const bf16* eb = reinterpret_cast<const bf16*>(&vb);
        uint4 vo;
        bf16* eo = reinterpret_cast<bf16*>(&vo);
#pragma unroll
        for (int k = 0; k < 8; k++) eo[k] = __float2bfloat16_rn(ldf(ea[k]) + ldf(eb[k]));
        out[i] = vo;
    }
}

template <typename T>
__global__ void residual_backward_kernel(T* da, T* db, const T* dout, long n) {
    LLMT_GRID_STRIDE(i, n) {
        const float g = ldf(dout[i]);
        da[i] = cvt<T>(ldf(da[i]) + g);
        db[i] = cvt<T>(ldf(db[i]) + g);
    }
}

__host__ __device__ inline uint64_t splitmix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

template <typename T>
__global__ void dropout_kernel(T* out, const T* inp, uint32_t threshold, float scale, uint64_t key, long n) {
    LLMT_GRID_STRIDE(i, n) {
        const uint32_t u = static_cast<uint32_t>(splitmix64(key + static_cast<uint64_t>(i)) >> 40);
        out[i] = cvt<T>(u >= threshold ? ldf(inp[i]) * scale : 0.0f);
    }
}

__global__ void scale_kernel(float* x, float s, long n) {
    LLMT_GRID_STRIDE(i, n) x[i] *= s;
}

template <typename D, typename S>
__global__ void convert_kernel(D* dst, const S* src, long n) {
    LLMT_GRID_STRIDE(i, n) dst[i] = cvt<D>(ldf(src[i]));
}

template <typename T>
void dropout_apply(T* out, const T* inp, float p, uint64_t seed, size_t N, cudaStream_t stream) {
    // Threshold, scale and key exactly as cpu/dropout.cpp computes them.
    const uint32_t threshold = static_cast<uint32_t>(static_cast<double>(p) * (1u << 24));
    const float scale = 1.0f / (1.0f - p);
    const long n = static_cast<long>(N);
    dropout_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(out, inp, threshold, scale, splitmix64(seed), n);
    LLMT_CUDA_CHECK_LAUNCH("dropout_kernel");
}

template <typename T>
void gelu_forward_t(T* out, const T* inp, size_t N, cudaStream_t stream) {
    const long n = static_cast<long>(N);
    gelu_forward_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(out, inp, n);
    LLMT_CUDA_CHECK_LAUNCH("gelu_forward_kernel");
}

template <typename T>
void gelu_backward_t(T* dinp, const T* inp, const T* dout, size_t N, cudaStream_t stream) {
    const long n = static_cast<long>(N);
    gelu_backward_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(dinp, inp, dout, n);
    LLMT_CUDA_CHECK_LAUNCH("gelu_backward_kernel");
}

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <typename T>
void residual_forward_t(T* out, const T* inp1, const T* inp2, size_t N, cudaStream_t stream) {
    const long n = static_cast<long>(N);
    if constexpr (sizeof(T) == 2) {
        if (N % 8 == 0 && aligned16(out) && aligned16(inp1) && aligned16(inp2)) {
            residual_forward_bf16x8_kernel<<<grid_for(n / 8, kBlock), kBlock, 0, stream>>>(
                reinterpret_cast<uint4*>(out), reinterpret_cast<const uint4*>(inp1),
                reinterpret_cast<const uint4*>(inp2), n / 8);
            LLMT_CUDA_CHECK_LAUNCH("residual_forward_bf16x8_kernel");
            return;
        }
    }
    residual_forward_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(out, inp1, inp2, n);
    LLMT_CUDA_CHECK_LAUNCH("residual_forward_kernel");
}

template <typename T>
void residual_backward_t(T* dinp1, T* dinp2, const T* dout, size_t N, cudaStream_t stream) {
    const long n = static_cast<long>(N);
    residual_backward_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(dinp1, dinp2, dout, n);
    LLMT_CUDA_CHECK_LAUNCH("residual_backward_kernel");
}

template <typename D, typename S>
void convert_t(D* dst, const S* src, size_t N, cudaStream_t stream) {
    const long n = static_cast<long>(N);
    convert_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(dst, src, n);
    LLMT_CUDA_CHECK_LAUNCH("convert_kernel");
}

}  // namespace

#define LLMT_ELEMENTWISE_FOR(T)                                                                                  \
    void gelu_forward(T* out, const T* inp, size_t N, cudaStream_t s) { gelu_forward_t(out, inp, N, s); }        \
    void gelu_backward(T* dinp, const T* inp, const T* dout, size_t N, cudaStream_t s) {                          \
        gelu_backward_t(dinp, inp, dout, N, s);                                                                   \
    }                                                                                                             \
    void residual_forward(T* out, const T* inp1, const T* inp2, size_t N, cudaStream_t s) {                       \
        residual_forward_t(out, inp1, inp2, N, s);                                                                \
    }                                                                                                             \
    void residual_backward(T* dinp1, T* dinp2, const T* dout, size_t N, cudaStream_t s) {                         \
        residual_backward_t(dinp1, dinp2, dout, N, s);                                                            \
    }                                                                                                             \
    void dropout_forward(T* out, const T* inp, float p, uint64_t seed, size_t N, cudaStream_t s) {                \
        dropout_apply(out, inp, p, seed, N, s);                                                                   \
    }                                                                                                             \
    void dropout_backward(T* dinp, const T* dout, float p, uint64_t seed, size_t N, cudaStream_t s) {             \
        dropout_apply(dinp, dout, p, seed, N, s);                                                                 \
    }
LLMT_ELEMENTWISE_FOR(float)
LLMT_ELEMENTWISE_FOR(bf16)
#undef LLMT_ELEMENTWISE_FOR

void scale_inplace(float* x, size_t N, float s, cudaStream_t stream) {
    const long n = static_cast<long>(N);
    scale_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(x, s, n);
    LLMT_CUDA_CHECK_LAUNCH("scale_kernel");
}

void convert(bf16* dst, const float* src, size_t N, cudaStream_t s) { convert_t(dst, src, N, s); }
void convert(float* dst, const bf16* src, size_t N, cudaStream_t s) { convert_t(dst, src, N, s); }

}  // namespace llmt::kernels::cuda
