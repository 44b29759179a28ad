// LayerNorm forward/backward (llm.c train_gpt2.c). Statistics in fp32 with a two-pass mean/variance,
// which is exact enough for C <= 8k channels and matches torch's fp32 result to ~1e-6.
#include "kernels/cpu/layernorm.h"

#include <omp.h>

#include <cmath>
#include <cstddef>
#include <vector>

namespace llmt::kernels::cpu {

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, float eps, int B, int T, int C) {
    const long rows = static_cast<long>(B) * T;
#pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++) {
        const float* x = inp + static_cast<size_t>(r) * C;
        float m = 0.0f;
#pragma omp simd reduction(+ : m)
        for (int c = 0; c < C; c++) m += x[c];
        m /= static_cast<float>(C);
        float v = 0.0f;
#pragma omp simd reduction(+ : v)
        for (int c = 0; c < C; c++) {
            const float d = x[c] - m;
            v += d * d;
        }
        v /= static_cast<float>(C);
        const float s = 1.0f / std::sqrt(v + eps);
        float* o = out + static_cast<size_t>(r) * C;
#pragma omp simd
        for (int c = 0; c < C; c++) o[c] = (x[c] - m) * s * weight[c] + bias[c];
        mean[r] = m;
        rstd[r] = s;
    }
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int B, int T, int C) {
    const long rows = static_cast<long>(B) * T;
    // dweight/dbias sum over all rows: each thread accumulates its rows (a static partition) in its own
    // slot, then the slots are added into the parameter grads in thread order after the parallel region.
    // A fixed order, not a critical section's arrival order: run.deterministic relies on it (the same
    // thread count gives the same bits).
    const int nth = omp_get_max_threads();
    const size_t Cz = static_cast<size_t>(C);
    std::vector<float> partial(2 * Cz * static_cast<size_t>(nth), 0.0f);  // slots of absent threads stay 0
#pragma omp parallel num_threads(nth)
    {
        float* dwp = partial.data() + 2 * Cz * static_cast<size_t>(omp_get_thread_num());
        float* dbp = dwp + Cz;
#pragma omp for schedule(static)
        for (long r = 0; r < rows; r++) {
            const float* x = inp + static_cast<size_t>(r) * C;
            const float* dy = dout + static_cast<size_t>(r) * C;
            float* dx = dinp + static_cast<size_t>(r) * C;
            const float m = mean[r], s = rstd[r];
            // dnorm = dy * weight; dx = s * (dnorm - mean(dnorm) - norm * mean(dnorm * norm))
            float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
#pragma omp simd reduction(+ : dnorm_mean, dnorm_norm_mean)
            for (int c = 0; c < C; c++) {
                const float n = (x[c] - m) * s;
                const float dn = weight[c] * dy[c];
                dnorm_mean += dn;
                dnorm_norm_mean += dn * n;
            }
            dnorm_mean /= static_cast<float>(C);
            dnorm_norm_mean /= static_cast<float>(C);
#pragma omp simd
            for (int c = 0; c < C; c++) {
                const float n = (x[c] - m) * s;
                const float dn = weight[c] * dy[c];
                dbp[c] += dy[c];
                dwp[c] += n * dy[c];
                dx[c] += (dn - dnorm_mean - n * dnorm_norm_mean) * s;
            }
        }
    }
    for (int t = 0; t < nth; t++) {
        const float* dwp = partial.data() + 2 * Cz * static_cast<size_t>(t);
        const float* dbp = dwp + Cz;
        for (int c = 0; c < C; c++) {
            dweight[c] += dwp[c];
            dbias[c] += dbp[c];
        }
    }
}

}  // namespace llmt::kernels::cpu
