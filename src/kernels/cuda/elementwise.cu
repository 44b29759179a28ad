// Element-wise ops on CUDA (cuda/elementwise.h): grid-stride loops, fp32, accurate tanhf/expf so the
// results track the CPU kernels to a few ulp.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/runtime.h"

namespace llmt::kernels::cuda {
namespace {

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluCube = 0.044715f;
constexpr int kBlock = 256;

#define LLMT_GRID_STRIDE(i, n) \
    for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < (n); i += static_cast<long>(gridDim.x) * blockDim.x)

__global__ void gelu_forward_kernel(float* out, const float* inp, long n) {
    LLMT_GRID_STRIDE(i, n) {
        const float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(kGeluScale * (x + kGeluCube * x * x * x)));
    }
}

__global__ void gelu_backward_kernel(float* dinp, const float* inp, const float* dout, long n) {
    LLMT_GRID_STRIDE(i, n) {
        const float x = inp[i];
        const float t = tanhf(kGeluScale * (x + kGeluCube * x * x * x));
        const float sech2 = 1.0f - t * t;
        const float g = 0.5f * (1.0f + t) + 0.5f * x * sech2 * kGeluScale * (1.0f + 3.0f * kGeluCube * x * x);
        dinp[i] = g * dout[i];
    }
}

__global__ void residual_forward_kernel(float* out, const float* a, const float* b, long n) {
    LLMT_GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

__global__ void residual_backward_kernel(float* da, float* db, const float* dout, long n) {
    LLMT_GRID_STRIDE(i, n) {
        const float g = dout[i];
        da[i] += g;
        db[i] += g;
    }
}

__host__ __device__ inline uint64_t splitmix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

__global__ void dropout_kernel(float* out, const float* inp, uint32_t threshold, float scale, uint64_t key, long n) {
    LLMT_GRID_STRIDE(i, n) {
        const uint32_t u = static_cast<uint32_t>(splitmix64(key + static_cast<uint64_t>(i)) >> 40);
        out[i] = u >= threshold ? inp[i] * scale : 0.0f;
    }
}

__global__ void scale_kernel(float* x, float s, long n) {
    LLMT_GRID_STRIDE(i, n) x[i] *= s;
}

void dropout_apply(float* out, const float* inp, float p, uint64_t seed, size_t N, cudaStream_t stream) {
    // Threshold, scale and key exactly as cpu/dropout.cpp computes them.
    const uint32_t threshold = static_cast<uint32_t>(static_cast<double>(p) * (1u << 24));
    const float scale = 1.0f / (1.0f - p);
    const long n = static_cast<long>(N);
    dropout_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(out, inp, threshold, scale, splitmix64(seed), n);
    LLMT_CUDA_CHECK_LAUNCH("dropout_kernel");
}

}  // namespace

void gelu_forward(float* out, const float* inp, size_t N, cudaStream_t stream) {
    const long n = static_cast<long>(N);
    gelu_forward_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(out, inp, n);
    LLMT_CUDA_CHECK_LAUNCH("gelu_forward_kernel");
}

void gelu_backward(float* dinp, const float* inp, const float* dout, size_t N, cudaStream_t stream) {
    const long n = static_cast<long>(N);
    gelu_backward_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(dinp, inp, dout, n);
    LLMT_CUDA_CHECK_LAUNCH("gelu_backward_kernel");
}

void residual_forward(float* out, const float* inp1, const float* inp2, size_t N, cudaStream_t stream) {
    const long n = static_cast<long>(N);
    residual_forward_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(out, inp1, inp2, n);
    LLMT_CUDA_CHECK_LAUNCH("residual_forward_kernel");
}

void residual_backward(float* dinp1, float* dinp2, const float* dout, size_t N, cudaStream_t stream) {
    const long n = static_cast<long>(N);
    residual_backward_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(dinp1, dinp2, dout, n);
    LLMT_CUDA_CHECK_LAUNCH("residual_backward_kernel");
}

void dropout_forward(float* out, const float* inp, float p, uint64_t seed, size_t N, cudaStream_t stream) {
    dropout_apply(out, inp, p, seed, N, stream);
}

void dropout_backward(float* dinp, const float* dout, float p, uint64_t seed, size_t N, cudaStream_t stream) {
    dropout_apply(dinp, dout, p, seed, N, stream);
}

void scale_inplace(float* x, size_t N, float s, cudaStream_t stream) {
    const long n = static_cast<long>(N);
    scale_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(x, s, n);
    LLMT_CUDA_CHECK_LAUNCH("scale_kernel");
}

}  // namespace llmt::kernels::cuda
