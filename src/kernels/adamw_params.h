// Hyper-parameters of one AdamW update call, shared by the CPU and CUDA backends (kernels/ops.h).
#pragma once

namespace llmt::kernels {

struct AdamWParams {
    float lr = 1e-3f;
    float beta1 = 0.9f;
    float beta2 = 0.999f;
    float eps = 1e-8f;
    float weight_decay = 0.0f;  // 0 for tensors excluded from decay (biases, norms, ...)
    float grad_scale = 1.0f;    // gradient multiplier applied on read (global-norm clipping)
    long step = 1;              // 1-based step count t, for bias correction 1 - beta^t
};

}  // namespace llmt::kernels
