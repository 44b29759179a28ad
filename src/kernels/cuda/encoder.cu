// Token + position embedding on CUDA (cuda/encoder.h); llm.c encoder kernels, fp32.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/encoder.h"
#include "kernels/cuda/runtime.h"

namespace llmt::kernels::cuda {
namespace {

__global__ void encoder_forward_kernel(float* out, const int32_t* inp, const float* wte, const float* wpe, int T,
                                       int C, long N) {
    for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < N;
         i += static_cast<long>(gridDim.x) * blockDim.x) {
        const long bt = i / C;
        const int c = static_cast<int>(i - bt * C);
        const int t = static_cast<int>(bt % T);
        out[i] = wte[static_cast<long>(inp[bt]) * C + c] + wpe[static_cast<long>(t) * C + c];
    }
}

__global__ void encoder_backward_wte_kernel(float* dwte, const float* dout, const int32_t* inp, int C, long N) {
    for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < N;
         i += static_cast<long>(gridDim.x) * blockDim.x) {
        const long bt = i / C;
        const int c = static_cast<int>(i - bt * C);
        atomicAdd(&dwte[static_cast<long>(inp[bt]) * C + c], dout[i]);
    }
}

// One thread per (t, c): deterministic sum over the batch.
__global__ void encoder_backward_wpe_kernel(float* dwpe, const float* dout, int B, int T, int C) {
    const long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x;
    if (i >= static_cast<long>(T) * C) return;
    float s = 0.0f;
    for (int b = 0; b < B; b++) s += dout[static_cast<long>(b) * T * C + i];
    dwpe[i] += s;
}

}  // namespace

void encoder_forward(float* out, const int32_t* inp, const float* wte, const float* wpe, int B, int T, int C,
                     cudaStream_t stream) {
    const long N = static_cast<long>(B) * T * C;
    encoder_forward_kernel<<<grid_for(N, 256), 256, 0, stream>>>(out, inp, wte, wpe, T, C, N);
    LLMT_CUDA_CHECK_LAUNCH("encoder_forward_kernel");
}

void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B, int T, int C,
                      cudaStream_t stream) {
    const long N = static_cast<long>(B) * T * C;
    encoder_backward_wte_kernel<<<grid_for(N, 256), 256, 0, stream>>>(dwte, dout, inp, C, N);
    LLMT_CUDA_CHECK_LAUNCH("encoder_backward_wte_kernel");
    const long TC = static_cast<long>(T) * C;
    encoder_backward_wpe_kernel<<<grid_for(TC, 256, 1L << 30), 256, 0, stream>>>(dwpe, dout, B, T, C);
    LLMT_CUDA_CHECK_LAUNCH("encoder_backward_wpe_kernel");
}

}  // namespace llmt::kernels::cuda
