// AdamW update and the global-norm reduction on CUDA; same semantics as cpu/adamw.h and cpu/reduce.h
// (torch.optim.AdamW's single-tensor arithmetic in fp32; sum of squares accumulated in fp64).
// Legend: N elements.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/adamw_params.h"

namespace llmt::kernels::cuda {

// params, m, v (N) updated in place; grads (N) read (times hp.grad_scale).
void adamw_update(float* params, float* m, float* v, const float* grads, size_t N, const AdamWParams& hp,
                  cudaStream_t stream);
// sum_i x[i]^2 in fp64; synchronises the stream to return the value.
double sum_squares(const float* x, size_t N, cudaStream_t stream);

}  // namespace llmt::kernels::cuda
