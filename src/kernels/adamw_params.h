// Hyper-parameters of one AdamW update call, shared by the CPU and CUDA backends (kernels/ops.h).
#pragma once

#include <cmath>
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

// Step hp.step's bias corrections as the update kernels take them (host side, shared by the CPU and CUDA
// backends so they use the same fp32 constants): step_size = lr / (1 - beta1^t), inv_sqrt_bc2 =
// 1 / sqrt(1 - beta2^t), computed in double and rounded once.
struct AdamWBiasCorrection {
    float step_size, inv_sqrt_bc2;
};
inline AdamWBiasCorrection adamw_bias_correction(const AdamWParams& hp) {
    const double bc1 = 1.0 - std::pow(static_cast<double>(hp.beta1), static_cast<double>(hp.step));
    const double bc2 = 1.0 - std::pow(static_cast<double>(hp.beta2), static_cast<double>(hp.step));
    return {static_cast<float>(hp.lr / bc1), static_cast<float>(1.0 / std::sqrt(bc2))};
}

// A run of elements [begin, end) of a flat parameter buffer updated with the same hyper-parameters;
// decay false: weight decay 0 (biases, norms).
struct AdamWRun {
    int64_t begin = 0, end = 0;
    bool decay = true;
};

}  // namespace llmt::kernels
