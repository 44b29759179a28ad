// AdamW update (adamw.h), arranged as torch/optim/adamw.py _single_tensor_adamw does it.
#include "kernels/cpu/adamw.h"

#include <cmath>

#include "kernels/cpu/simd.h"

namespace llmt::kernels::cpu {
namespace {

LLMT_CPU_CLONES
void adamw_block(float* params, float* m, float* v, const float* grads, long n, float decay, float b1,
                 float b2, float step_size, float inv_sqrt_bc2, float eps, float gs) {
#pragma omp simd
    for (long i = 0; i < n; i++) {
        const float g = grads[i] * gs;
        const float mi = b1 * m[i] + (1.0f - b1) * g;
        const float vi = b2 * v[i] + (1.0f - b2) * g * g;
        m[i] = mi;
        v[i] = vi;
        const float p = params[i] * decay;
        params[i] = p - step_size * mi / (std::sqrt(vi) * inv_sqrt_bc2 + eps);
    }
}

}  // namespace

void adamw_update(float* params, float* m, float* v, const float* grads, size_t N, const AdamWParams& hp) {
    const auto [step_size, inv_sqrt_bc2] = adamw_bias_correction(hp);
    const float decay = 1.0f - hp.lr * hp.weight_decay;
    constexpr long kBlock = 16384;
    const long n = static_cast<long>(N);
    const long blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
    for (long b = 0; b < blocks; b++) {
        const long i0 = b * kBlock, len = (n - i0) < kBlock ? n - i0 : kBlock;
        adamw_block(params + i0, m + i0, v + i0, grads + i0, len, decay, hp.beta1, hp.beta2, step_size,
                    inv_sqrt_bc2, hp.eps, hp.grad_scale);
    }
}

}  // namespace llmt::kernels::cpu
