// Token + position embedding on CUDA (cuda/encoder.h); llm.c encoder kernels, templated on the storage
// type of the activations and the weights' compute copy (fp32 or bf16); parameter gradients are fp32.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/encoder.h"
#include "kernels/cuda/runtime.h"

namespace llmt::kernels::cuda {
namespace {

template <typename T>
__global__ void encoder_forward_kernel(T* out, const int32_t* inp, const T* wte, const T* wpe, int T_, int C,
                                       long N) {
    for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < N;
         i += static_cast<long>(gridDim.x) * blockDim.x) {
        const long bt = i / C;
        const int c = static_cast<int>(i - bt * C);
        const int t = static_cast<int>(bt % T_);
        const float pos = wpe ? ldf(wpe[static_cast<long>(t) * C + c]) : 0.0f;
        out[i] = cvt<T>(ldf(wte[static_cast<long>(inp[bt]) * C + c]) + pos);
    }
}

template <typename T>
__global__ void encoder_backward_wte_kernel(float* dwte, const T* dout, const int32_t* inp, int C, long N) {
    for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < N;
         i += static_cast<long>(gridDim.x) * blockDim.x) {
        const long bt = i / C;
        const int c = static_cast<int>(i - bt * C);
        atomicAdd(&dwte[static_cast<long>(inp[bt]) * C + c], ldf(dout[i]));
    }
}

// One thread per (t, c): deterministic sum over the batch.
template <typename T>
__global__ void encoder_backward_wpe_kernel(float* dwpe, const T* dout, int B, int T_, int C) {
    const long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x;
    if (i >= static_cast<long>(T_) * C) return;
    float s = 0.0f;
    for (int b = 0; b < B; b++) s += ldf(dout[static_cast<long>(b) * T_ * C + i]);
    dwpe[i] += s;
}

template <typename T>
void forward_t(T* out, const int32_t* inp, const T* wte, const T* wpe, int B, int T_, int C, cudaStream_t stream) {
    const long N = static_cast<long>(B) * T_ * C;
    encoder_forward_kernel<<<grid_for(N, 256), 256, 0, stream>>>(out, inp, wte, wpe, T_, C, N);
    LLMT_CUDA_CHECK_LAUNCH("encoder_forward_kernel");
}

template <typename T>
void backward_t(float* dwte, float* dwpe, const T* dout, const int32_t* inp, int B, int T_, int C,
                cudaStream_t stream) {
    const long N = static_cast<long>(B) * T_ * C;
    encoder_backward_wte_kernel<<<grid_for(N, 256), 256, 0, stream>>>(dwte, dout, inp, C, N);
    LLMT_CUDA_CHECK_LAUNCH("encoder_backward_wte_kernel");
    if (!dwpe) return;  // no position table (LLaMA)
    const long TC = static_cast<long>(T_) * C;
    encoder_backward_wpe_kernel<<<grid_for(TC, 256, 1L << 30), 256, 0, stream>>>(dwpe, dout, B, T_, C);
    LLMT_CUDA_CHECK_LAUNCH("encoder_backward_wpe_kernel");
}

}  // namespace

void encoder_forward(float* out, const int32_t* inp, const float* wte, const float* wpe, int B, int T, int C,
                     cudaStream_t stream) {
    forward_t(out, inp, wte, wpe, B, T, C, stream);
}
void encoder_forward(bf16* out, const int32_t* inp, const bf16* wte, const bf16* wpe, int B, int T, int C,
                     cudaStream_t stream) {
    forward_t(out, inp, wte, wpe, B, T, C, stream);
}
void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B, int T, int C,
                      cudaStream_t stream) {
    backward_t(dwte, dwpe, dout, inp, B, T, C, stream);
}
void encoder_backward(float* dwte, float* dwpe, const bf16* dout, const int32_t* inp, int B, int T, int C,
                      cudaStream_t stream) {
    backward_t(dwte, dwpe, dout, inp, B, T, C, stream);
}

}  // namespace llmt::kernels::cuda
