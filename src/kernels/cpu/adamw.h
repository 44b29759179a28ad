// AdamW update (Loshchilov & Hutter 2019, decoupled weight decay), step for step what
// torch.optim.AdamW (foreach=False, amsgrad=False, maximize=False) computes in fp32.
// Legend: N elements of one parameter tensor (or any contiguous group sharing hyper-parameters).
#pragma once

#include <cstddef>

#include "kernels/adamw_params.h"

namespace llmt::kernels::cpu {

using AdamWParams = ::llmt::kernels::AdamWParams;

// For each i: g = grads[i] * grad_scale;  params[i] *= 1 - lr * weight_decay;
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2;
//   params[i] -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps).
// params, m, v (N) are updated in place; grads (N) is read only.
void adamw_update(float* params, float* m, float* v, const float* grads, size_t N, const AdamWParams& hp);

}  // namespace llmt::kernels::cpu
