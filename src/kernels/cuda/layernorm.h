// LayerNorm over the last dim on CUDA (biased variance, eps given); same semantics as cpu/layernorm.h.
// Legend: B batch, T time, C channels. dinp += (residual stream); dweight, dbias += (atomic adds).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace llmt::kernels::cuda {

// out (B,T,C); mean, rstd (B,T) saved for backward (rstd = 1 / sqrt(var + eps)); inp (B,T,C); weight,
// bias (C). The backward reads eps through rstd only.
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, float eps, int B, int T, int C, cudaStream_t stream);
// dinp (B,T,C) +=; dweight, dbias (C) +=. dout, inp (B,T,C); weight (C); mean, rstd (B,T). dinp_colsum
// (C, optional) += the column sums of the updated dinp (in the same pass for bf16 with C % 256 == 0).
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int B, int T, int C,
                        cudaStream_t stream, float* dinp_colsum = nullptr);
// bf16 activations and weights (fp32 statistics and arithmetic); dweight, dbias fp32.
void layernorm_forward(__nv_bfloat16* out, float* mean, float* rstd, const __nv_bfloat16* inp,
                       const __nv_bfloat16* weight, const __nv_bfloat16* bias, float eps, int B, int T, int C,
                       cudaStream_t stream);
void layernorm_backward(__nv_bfloat16* dinp, float* dweight, float* dbias, const __nv_bfloat16* dout,
                        const __nv_bfloat16* inp, const __nv_bfloat16* weight, const float* mean, const float* rstd,
                        int B, int T, int C, cudaStream_t stream, float* dinp_colsum = nullptr);

}  // namespace llmt::kernels::cuda
