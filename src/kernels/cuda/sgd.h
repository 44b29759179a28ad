// SGD with momentum on CUDA; same semantics and fp32 arithmetic as cpu/sgd.h (torch.optim.SGD's
// single-tensor update). Legend: N elements.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "kernels/sgd_params.h"

namespace llmt::kernels::cuda {

// params, buf (null when hp.momentum is 0) updated in place over runs[0..n_runs) of one flat buffer
// (sorted, disjoint): run r uses hp.weight_decay when runs[r].decay, 0 otherwise; elements outside every
// run are untouched. grads read (times hp.grad_scale). params_lp (may be null): the bf16 compute copy,
// rewritten from the updated fp32 values in the same pass. One launch per 128 runs.
void sgd_update_runs(float* params, __nv_bfloat16* params_lp, float* buf, const float* grads, const AdamWRun* runs,
                     int n_runs, const SgdParams& hp, cudaStream_t stream);

}  // namespace llmt::kernels::cuda
