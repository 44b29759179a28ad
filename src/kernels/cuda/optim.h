// AdamW update and the global-norm reduction on CUDA; same semantics as cpu/adamw.h and cpu/reduce.h
// (torch.optim.AdamW's single-tensor arithmetic in fp32; sum of squares accumulated in fp64).
// Legend: N elements.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/adamw_params.h"

namespace llmt::kernels::cuda {

// params, m, v (N) updated in place; grads (N) read (times hp.grad_scale). params_lp (N, may be null):
// the bf16 compute copy of the parameters, rewritten from the updated fp32 values in the same pass.
void adamw_update(float* params, __nv_bfloat16* params_lp, float* m, float* v, const float* grads, size_t N,
                  const AdamWParams& hp, cudaStream_t stream);
// The same update over runs[0..n_runs) of one buffer in as few launches as possible (128 runs each):
// run r's elements [begin, end) use hp.weight_decay when runs[r].decay, 0 otherwise; elements outside
// every run are untouched. Runs sorted, disjoint.
void adamw_update_runs(float* params, __nv_bfloat16* params_lp, float* m, float* v, const float* grads,
                       const AdamWRun* runs, int n_runs, const AdamWParams& hp, cudaStream_t stream);
// sum_i x[i]^2 in fp64; synchronises the stream to return the value.
double sum_squares(const float* x, size_t N, cudaStream_t stream);

}  // namespace llmt::kernels::cuda
