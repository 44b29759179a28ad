// AdamW and sum of squares on CUDA (cuda/optim.h).
#include <cmath>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/optim.h"
#include "kernels/cuda/runtime.h"

namespace llmt::kernels::cuda {
namespace {

constexpr int kBlock = 256;

// params_lp (may be null): the bf16 compute copy of params, refreshed in the same pass.
__global__ void adamw_kernel(float* params, bf16* params_lp, float* m, float* v, const float* grads, long n,
                             float decay, float b1, float b2, float step_size, float inv_sqrt_bc2, float eps,
                             float gs) {
    for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<long>(gridDim.x) * blockDim.x) {
        const float g = grads[i] * gs;
        const float mi = b1 * m[i] + (1.0f - b1) * g;
        const float vi = b2 * v[i] + (1.0f - b2) * g * g;
        m[i] = mi;
        v[i] = vi;
        const float p = params[i] * decay - step_size * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
        params[i] = p;
        if (params_lp) params_lp[i] = __float2bfloat16_rn(p);
    }
}

__global__ void sum_squares_kernel(double* out, const float* x, long n) {
    __shared__ double scratch[32];
    double s = 0.0;
    for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<long>(gridDim.x) * blockDim.x) {
        const double v = x[i];
        s += v * v;
    }
    s = block_sum(s, scratch);
    if (threadIdx.x == 0) atomicAdd(out, s);
}

}  // namespace

void adamw_update(float* params, __nv_bfloat16* params_lp, float* m, float* v, const float* grads, size_t N,
                  const AdamWParams& hp, cudaStream_t stream) {
    // Same host-side constants as cpu/adamw.cpp.
    const double bc1 = 1.0 - std::pow(static_cast<double>(hp.beta1), static_cast<double>(hp.step));
    const double bc2 = 1.0 - std::pow(static_cast<double>(hp.beta2), static_cast<double>(hp.step));
    const float step_size = static_cast<float>(hp.lr / bc1);
    const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
    const float decay = 1.0f - hp.lr * hp.weight_decay;
    const long n = static_cast<long>(N);
    adamw_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(params, params_lp, m, v, grads, n, decay, hp.beta1, hp.beta2,
                                                             step_size, inv_sqrt_bc2, hp.eps, hp.grad_scale);
    LLMT_CUDA_CHECK_LAUNCH("adamw_kernel");
}

double sum_squares(const float* x, size_t N, cudaStream_t stream) {
    // One 8-byte accumulator per process, reused by every call (calls are serialised on the stream).
    static double* acc = [] {
        double* p = nullptr;
        LLMT_CUDA_CHECK(cudaMalloc(&p, sizeof(double)));
        return p;
    }();
    LLMT_CUDA_CHECK(cudaMemsetAsync(acc, 0, sizeof(double), stream));
    const long n = static_cast<long>(N);
    sum_squares_kernel<<<grid_for(n, kBlock, 1024), kBlock, 0, stream>>>(acc, x, n);
    LLMT_CUDA_CHECK_LAUNCH("sum_squares_kernel");
    double host = 0.0;
    LLMT_CUDA_CHECK(cudaMemcpyAsync(&host, acc, sizeof(double), cudaMemcpyDeviceToHost, stream));
    LLMT_CUDA_CHECK(cudaStreamSynchronize(stream));
    return host;
}

}  // namespace llmt::kernels::cuda
