// SwiGLU forward/backward (swiglu.h): one row per OpenMP iteration, libm exp (accurate to an ulp, so the
// CUDA kernels' expf tracks it closely). sigmoid(x) = 1 / (1 + exp(-x)) is 0 for x < -88 (exp overflows to
// +inf), which is the correctly rounded limit.
#include "kernels/cpu/swiglu.h"

#include <cmath>
#include <cstdint>

namespace llmt::kernels::cpu {

void swiglu_forward(float* out, const float* inp, size_t N, int F) {
    const long rows = static_cast<long>(N);
#pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++) {
        const float* g = inp + static_cast<int64_t>(r) * 2 * F;
        const float* u = g + F;
        float* o = out + static_cast<int64_t>(r) * F;
        for (int j = 0; j < F; j++) {
            const float s = 1.0f / (1.0f + std::exp(-g[j]));
            o[j] = g[j] * s * u[j];
        }
    }
}

void swiglu_backward(float* dinp, const float* dout, const float* inp, size_t N, int F) {
    const long rows = static_cast<long>(N);
#pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++) {
        const float* g = inp + static_cast<int64_t>(r) * 2 * F;
        const float* u = g + F;
        const float* dy = dout + static_cast<int64_t>(r) * F;
        float* dg = dinp + static_cast<int64_t>(r) * 2 * F;
        float* du = dg + F;
        for (int j = 0; j < F; j++) {
            const float s = 1.0f / (1.0f + std::exp(-g[j]));
            const float silu = g[j] * s;
            // silu'(x) = s (1 + x (1 - s))
            dg[j] = dy[j] * u[j] * s * (1.0f + g[j] * (1.0f - s));
            du[j] = dy[j] * silu;
        }
    }
}

}  // namespace llmt::kernels::cpu
