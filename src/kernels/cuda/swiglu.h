// SwiGLU on CUDA, fp32 or bf16 storage (fp32 arithmetic); same semantics as cpu/swiglu.h.
// Legend: N rows, F hidden width; inp (N,2F) = [gate | up]. dinp = (may alias inp).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>

namespace llmt::kernels::cuda {

#define LLMT_SWIGLU_DECL(T)                                                                    \
    /* out (N,F) = silu(gate) * up. */                                                         \
    void swiglu_forward(T* out, const T* inp, size_t N, int F, cudaStream_t stream);           \
    /* dinp (N,2F) = (dout * up * silu'(gate), dout * silu(gate)). */                         \
    void swiglu_backward(T* dinp, const T* dout, const T* inp, size_t N, int F, cudaStream_t stream);
LLMT_SWIGLU_DECL(float)
LLMT_SWIGLU_DECL(__nv_bfloat16)
#undef LLMT_SWIGLU_DECL

}  // namespace llmt::kernels::cuda
