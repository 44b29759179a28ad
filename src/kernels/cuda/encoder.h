// Token + position embedding on CUDA; same semantics as cpu/encoder.h. Parameter grads use +=.
// Legend: B batch, T time, C channels. Ids are not range-checked on the device (ops.h documents this).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace llmt::kernels::cuda {

// out (B,T,C) = wte[inp[b,t], :] + wpe[t, :]; inp (B,T); wte (V,C); wpe (>=T, C).
void encoder_forward(float* out, const int32_t* inp, const float* wte, const float* wpe, int B, int T, int C,
                     cudaStream_t stream);
// dwte (V,C) += scatter of dout by id (atomic adds: summation order varies between runs);
// dwpe (>=T,C) += sum over b of dout[b,t,:]. dout (B,T,C); inp (B,T).
void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B, int T, int C,
                      cudaStream_t stream);
// bf16 storage of activations and weights (fp32 arithmetic); parameter gradients stay fp32.
void encoder_forward(__nv_bfloat16* out, const int32_t* inp, const __nv_bfloat16* wte, const __nv_bfloat16* wpe,
                     int B, int T, int C, cudaStream_t stream);
void encoder_backward(float* dwte, float* dwpe, const __nv_bfloat16* dout, const int32_t* inp, int B, int T, int C,
                      cudaStream_t stream);

}  // namespace llmt::kernels::cuda
