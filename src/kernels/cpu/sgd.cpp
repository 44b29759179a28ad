// SGD with momentum (sgd.h), arranged as torch/optim/sgd.py _single_tensor_sgd does it.
#include "kernels/cpu/sgd.h"

#include "kernels/cpu/simd.h"

namespace llmt::kernels::cpu {
namespace {

// Plain SGD (momentum 0): torch keeps no buffer and ignores dampening and nesterov.
LLMT_CPU_CLONES
void sgd_plain_block(float* params, const float* grads, long n, float lr, float wd, float gs) {
#pragma omp simd
    for (long i = 0; i < n; i++) {
        const float d = grads[i] * gs + wd * params[i];
        params[i] = params[i] - lr * d;
    }
}

LLMT_CPU_CLONES
void sgd_momentum_block(float* params, float* buf, const float* grads, long n, float lr, float wd, float gs,
                        float mom, float keep, bool first, bool nesterov) {
#pragma omp simd
    for (long i = 0; i < n; i++) {
        const float d = grads[i] * gs + wd * params[i];
        const float b = first ? d : mom * buf[i] + keep * d;
        buf[i] = b;
        const float step = nesterov ? d + mom * b : b;
        params[i] = params[i] - lr * step;
    }
}

}  // namespace

void sgd_update(float* params, float* buf, const float* grads, size_t N, const SgdParams& hp) {
    // 1 - dampening in double then rounded once, as torch forms the scalar from Python floats.
    const float keep = static_cast<float>(1.0 - static_cast<double>(hp.dampening));
    constexpr long kBlock = 16384;
    const long n = static_cast<long>(N);
    const long blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
    for (long b = 0; b < blocks; b++) {
        const long i0 = b * kBlock, len = (n - i0) < kBlock ? n - i0 : kBlock;
        if (hp.momentum == 0.0f)
            sgd_plain_block(params + i0, grads + i0, len, hp.lr, hp.weight_decay, hp.grad_scale);
        else
            sgd_momentum_block(params + i0, buf + i0, grads + i0, len, hp.lr, hp.weight_decay, hp.grad_scale,
                               hp.momentum, keep, hp.first_step, hp.nesterov);
    }
}

}  // namespace llmt::kernels::cpu
