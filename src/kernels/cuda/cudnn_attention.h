// Causal multi-head self-attention in bf16 through cuDNN's fused flash-attention engine (wgmma on Hopper),
// built as a backend-API operation graph (the matmul/pointwise/reduction composite that cudnn-frontend's
// SDPA node lowers to; cuDNN docs "Scaled Dot Product Attention"). libcudnn is dlopen'ed at run time, so
// binaries without cuDNN still run: every entry point then returns false and the caller uses
// flash_attention.h. Same layouts and semantics as flash_attention.h; lse is interchangeable between them.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>

namespace llmt::kernels::cuda {

// cuDNN's version as cudnnGetVersion() reports it (e.g. 91900), or 0 when libcudnn cannot be loaded.
// Loads the library on first call; never throws. Thread-safe.
size_t cudnn_attention_library_version();

// out (B,T,C) bf16; lse (B,NH,T) fp32, the natural-log log-sum-exp of each row of scaled scores
// (scale 1/sqrt(HS)), as flash_attention_forward writes it; qkv (B,T,C3) bf16, C3 = C + 2*KV*HS, with q, k, v
// at channel offsets 0, C, C + KV*HS and head h at channels [h*HS, (h+1)*HS) of each; query head h reads kv
// head h / (NH/KV) (grouped-query attention; KV == NH: multi-head). Causal.
// Returns false, having launched nothing and written nothing, when cuDNN is missing or cannot plan this
// shape (or the shape is invalid); the first such reason per process goes to stderr as one line.
// Throws DeviceError when a planned graph fails to execute (a real fault, not a missing feature).
// The plan for each (device, shape) is built once (this can take a second: cuDNN compiles its kernel) and
// cached; the call is thread-safe and asynchronous on stream s. All calls on one device share one cuDNN
// handle and one workspace (as the flash kernels share their scratch): do not overlap calls on two streams.
bool cudnn_attention_forward(__nv_bfloat16* out, float* lse, const __nv_bfloat16* qkv, int B, int T, int C, int NH,
                             int KV, cudaStream_t s);

// dqkv (B,T,C3) bf16, overwritten (activation gradient; dk/dv summed over each kv head's query heads). dout
// (B,T,C); qkv; out (B,T,C) and lse (B,NH,T) from either forward (this one or flash_attention_forward). Same
// return, error and caching contract as the forward. cuDNN's fp32 dQ accumulator lives in a grow-only
// per-device workspace.
bool cudnn_attention_backward(__nv_bfloat16* dqkv, const __nv_bfloat16* dout, const __nv_bfloat16* qkv,
                              const __nv_bfloat16* out, const float* lse, int B, int T, int C, int NH, int KV,
                              cudaStream_t s);

}  // namespace llmt::kernels::cuda
