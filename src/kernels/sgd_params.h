// Hyper-parameters of one SGD-with-momentum update call, shared by the CPU and CUDA backends (kernels/ops.h).
#pragma once

#include "kernels/adamw_params.h"  // AdamWRun: the decay / no-decay runs of a flat buffer

namespace llmt::kernels {

struct SgdParams {
    float lr = 1e-3f;
    float momentum = 0.0f;      // 0: plain SGD, no momentum buffer
    float dampening = 0.0f;     // the new gradient's weight in the buffer is 1 - dampening
    float weight_decay = 0.0f;  // L2, added to the gradient (g += weight_decay * p); 0 for runs without decay
    bool nesterov = false;      // step along g + momentum * buf instead of buf
    bool first_step = false;    // the buffer is set to the gradient (torch's buffer is None before its first step)
    float grad_scale = 1.0f;    // gradient multiplier applied on read (global-norm clipping)
};

}  // namespace llmt::kernels
