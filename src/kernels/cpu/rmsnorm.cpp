// RMSNorm forward/backward (rmsnorm.h). One row per iteration of a static OpenMP loop; the backward's
// dweight partials are per thread and added in thread order afterwards (run.deterministic: the same thread
// count gives the same bits), as layernorm.cpp does.
#include "kernels/cpu/rmsnorm.h"

#include <omp.h>

#include <cmath>
#include <cstddef>
#include <vector>

namespace llmt::kernels::cpu {
namespace {

// out = x * rstd * w for one row; returns rstd.
inline float rms_row(float* o, const float* x, const float* w, float eps, int C) {
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int c = 0; c < C; c++) ss += x[c] * x[c];
    const float s = 1.0f / std::sqrt(ss / static_cast<float>(C) + eps);
#pragma omp simd
    for (int c = 0; c < C; c++) o[c] = x[c] * s * w[c];
    return s;
}

}  // namespace

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, float eps, int B, int T, int C) {
    const long rows = static_cast<long>(B) * T;
#pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++) {
        const size_t off = static_cast<size_t>(r) * C;
        rstd[r] = rms_row(out + off, inp + off, weight, eps, C);
    }
}

void residual_rmsnorm_forward(float* residual_out, float* out, float* rstd, const float* inp1, const float* inp2,
                              const float* weight, float eps, int B, int T, int C) {
    const long rows = static_cast<long>(B) * T;
#pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++) {
        const size_t off = static_cast<size_t>(r) * C;
        float* h = residual_out + off;
#pragma omp simd
        for (int c = 0; c < C; c++) h[c] = inp1[off + c] + inp2[off + c];
        rstd[r] = rms_row(out + off, h, weight, eps, C);
    }
}

void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, int B, int T, int C) {
    const long rows = static_cast<long>(B) * T;
    const int nth = omp_get_max_threads();
    const size_t Cz = static_cast<size_t>(C);
    std::vector<float> partial(Cz * static_cast<size_t>(nth), 0.0f);  // slots of absent threads stay 0
#pragma omp parallel num_threads(nth)
    {
        float* dwp = partial.data() + Cz * static_cast<size_t>(omp_get_thread_num());
#pragma omp for schedule(static)
        for (long r = 0; r < rows; r++) {
            const float* x = inp + static_cast<size_t>(r) * C;
            const float* dy = dout + static_cast<size_t>(r) * C;
            float* dx = dinp + static_cast<size_t>(r) * C;
            const float s = rstd[r];
            // n = x s, dn = dy w: dx = s (dn - n mean(dn n)) (the mean term is d s / d x through sum x^2).
            float dnn = 0.0f;
#pragma omp simd reduction(+ : dnn)
            for (int c = 0; c < C; c++) dnn += weight[c] * dy[c] * x[c] * s;
            dnn /= static_cast<float>(C);
#pragma omp simd
            for (int c = 0; c < C; c++) {
                const float n = x[c] * s;
                dwp[c] += n * dy[c];
                dx[c] += (weight[c] * dy[c] - n * dnn) * s;
            }
        }
    }
    for (int t = 0; t < nth; t++) {
        const float* dwp = partial.data() + Cz * static_cast<size_t>(t);
        for (int c = 0; c < C; c++) dweight[c] += dwp[c];
    }
}

}  // namespace llmt::kernels::cpu
