// SGD with momentum, step for step what torch.optim.SGD (foreach=False, maximize=False) computes in fp32:
// weight decay as L2 on the gradient, the momentum buffer set to the first gradient, dampening, Nesterov.
// Legend: N elements of one parameter tensor (or any contiguous group sharing hyper-parameters).
#pragma once

#include <cstddef>

#include "kernels/sgd_params.h"

namespace llmt::kernels::cpu {

// For each i: d = grads[i] * grad_scale + weight_decay * params[i];
//   with momentum: buf[i] = first_step ? d : momentum * buf[i] + (1 - dampening) * d;
//                  d = nesterov ? d + momentum * buf[i] : buf[i];
//   params[i] -= lr * d.
// params, buf (N) are updated in place (buf unused, may be null, when momentum is 0); grads (N) read only.
void sgd_update(float* params, float* buf, const float* grads, size_t N, const SgdParams& hp);

}  // namespace llmt::kernels::cpu
