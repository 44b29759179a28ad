// LayerNorm on CUDA (cuda/layernorm.h): one warp per row, two-pass mean/variance in fp32 like the CPU
// kernel; the backward is llm.c's formula with per-block shared-memory partials of dweight/dbias.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/runtime.h"

namespace llmt::kernels::cuda {
namespace {

constexpr float kEps = 1e-5f;
constexpr int kWarps = 8;

__global__ void layernorm_forward_kernel(float* out, float* mean, float* rstd, const float* inp,
                                         const float* weight, const float* bias, long rows, int C) {
    const int lane = threadIdx.x % 32;
    const long row = blockIdx.x * static_cast<long>(kWarps) + threadIdx.x / 32;
    if (row >= rows) return;
    const float* x = inp + row * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += 32) s += x[c];
    const float m = warp_sum(s) / C;
    float v = 0.0f;
    for (int c = lane; c < C; c += 32) {
        const float d = x[c] - m;
        v += d * d;
    }
    const float r = 1.0f / sqrtf(warp_sum(v) / C + kEps);
    float* o = out + row * C;
    for (int c = lane; c < C; c += 32) o[c] = (x[c] - m) * r * weight[c] + bias[c];
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

// Dynamic shared memory: dweight and dbias partials (2C floats).
__global__ void layernorm_backward_kernel(float* dinp, float* dweight, float* dbias, const float* dout,
                                          const float* inp, const float* weight, const float* mean,
                                          const float* rstd, long rows, int C) {
    extern __shared__ float sh[];
    float* sdw = sh;
    float* sdb = sh + C;
    for (int c = threadIdx.x; c < 2 * C; c += blockDim.x) sh[c] = 0.0f;
    __syncthreads();
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (long row = blockIdx.x * static_cast<long>(kWarps) + warp; row < rows;
         row += static_cast<long>(gridDim.x) * kWarps) {
        const float* x = inp + row * C;
        const float* g = dout + row * C;
        const float m = mean[row], r = rstd[row];
        float a = 0.0f, b = 0.0f;  // sum dnorm, sum dnorm * norm
        for (int c = lane; c < C; c += 32) {
            const float n = (x[c] - m) * r;
            const float dn = weight[c] * g[c];
            a += dn;
            b += dn * n;
        }
        a = warp_sum(a) / C;
        b = warp_sum(b) / C;
        float* di = dinp + row * C;
        for (int c = lane; c < C; c += 32) {
            const float n = (x[c] - m) * r;
            const float dn = weight[c] * g[c];
            atomicAdd(&sdb[c], g[c]);
            atomicAdd(&sdw[c], n * g[c]);
            di[c] += (dn - a - n * b) * r;
        }
    }
    __syncthreads();
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        atomicAdd(&dweight[c], sdw[c]);
        atomicAdd(&dbias[c], sdb[c]);
    }
}

}  // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int B, int T, int C, cudaStream_t stream) {
    const long rows = static_cast<long>(B) * T;
    const unsigned grid = static_cast<unsigned>((rows + kWarps - 1) / kWarps);
    layernorm_forward_kernel<<<grid, kWarps * 32, 0, stream>>>(out, mean, rstd, inp, weight, bias, rows, C);
    LLMT_CUDA_CHECK_LAUNCH("layernorm_forward_kernel");
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int B, int T, int C,
                        cudaStream_t stream) {
    const long rows = static_cast<long>(B) * T;
    const size_t smem = sizeof(float) * 2 * static_cast<size_t>(C);
    if (smem > 48 * 1024)
        LLMT_CUDA_CHECK(cudaFuncSetAttribute(layernorm_backward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(smem)));
    long grid = (rows + kWarps - 1) / kWarps;
    if (grid > 264) grid = 264;  // ~2 blocks per SM: enough rows per block to amortise the C atomics
    layernorm_backward_kernel<<<static_cast<unsigned>(grid), kWarps * 32, smem, stream>>>(
        dinp, dweight, dbias, dout, inp, weight, mean, rstd, rows, C);
    LLMT_CUDA_CHECK_LAUNCH("layernorm_backward_kernel");
}

}  // namespace llmt::kernels::cuda
