// Hyper-parameters of one AdamW update call, shared by the CPU and CUDA backends (kernels/ops.h).
#pragma once

#include <cstdint>

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

// A run of elements [begin, end) of a flat parameter buffer updated with the same hyper-parameters;
// decay false: weight decay 0 (biases, norms).
struct AdamWRun {
    int64_t begin = 0, end = 0;
    bool decay = true;
};

}  // namespace llmt::kernels
