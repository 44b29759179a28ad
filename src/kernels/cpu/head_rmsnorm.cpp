// Per-head RMSNorm forward/backward (head_rmsnorm.h). The forward is one row per iteration of a static
// OpenMP loop; the backward's weight gradients are summed per block of kRowsPerPart rows and the blocks'
// sums added in block order, so the result does not depend on the thread count.
#include "kernels/cpu/head_rmsnorm.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

namespace llmt::kernels::cpu {
namespace {

constexpr int64_t kRowsPerPart = 64;

// o = x * s * w over one head of HS channels; returns s = 1 / sqrt(mean(x^2) + eps).
inline float norm_head(float* o, const float* x, const float* w, float eps, int HS) {
    float ss = 0.0f;
    for (int c = 0; c < HS; c++) ss += x[c] * x[c];
    const float s = 1.0f / std::sqrt(ss / static_cast<float>(HS) + eps);
    for (int c = 0; c < HS; c++) o[c] = x[c] * s * w[c];
    return s;
}

// One head's backward: dx = s * (dy w - xhat * mean(dy w xhat)) with xhat = x s; dw += dy xhat. dx may alias dy.
inline void norm_head_backward(float* dx, float* dw, const float* dy, const float* x, const float* w, float s,
                               int HS, float* tmp) {
    float dot = 0.0f;
    for (int c = 0; c < HS; c++) {
        const float xhat = x[c] * s;
        tmp[c] = dy[c] * w[c];
        dot += tmp[c] * xhat;
        dw[c] += dy[c] * xhat;
    }
    const float mean = dot / static_cast<float>(HS);
    for (int c = 0; c < HS; c++) dx[c] = s * (tmp[c] - x[c] * s * mean);
}

}  // namespace

void head_rmsnorm_forward(float* out, float* rstd, const float* inp, const float* q_weight, const float* k_weight,
                          float eps, int64_t N, int NH, int KV, int HS) {
    const int64_t C3 = static_cast<int64_t>(NH + 2 * KV) * HS, heads = NH + KV;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < N; r++) {
        const float* x = inp + r * C3;
        float* o = out + r * C3;
        for (int h = 0; h < heads; h++)
            rstd[r * heads + h] = norm_head(o + h * HS, x + h * HS, h < NH ? q_weight : k_weight, eps, HS);
        std::memcpy(o + heads * HS, x + heads * HS, sizeof(float) * static_cast<size_t>(KV) * HS);
    }
}

void head_rmsnorm_backward(float* dinp, float* dq_weight, float* dk_weight, const float* dout, const float* inp,
                           const float* q_weight, const float* k_weight, const float* rstd, int64_t N, int NH, int KV,
                           int HS) {
    const int64_t C3 = static_cast<int64_t>(NH + 2 * KV) * HS, heads = NH + KV;
    const int64_t parts = (N + kRowsPerPart - 1) / kRowsPerPart;
    // Per part: the q weight's gradient (HS), then the k weight's (HS).
    std::vector<float> partial(static_cast<size_t>(parts) * 2 * HS, 0.0f);
#pragma omp parallel
    {
        std::vector<float> tmp(static_cast<size_t>(HS));
#pragma omp for schedule(static)
        for (int64_t p = 0; p < parts; p++) {
            float* dq = partial.data() + p * 2 * HS;
            float* dk = dq + HS;
            for (int64_t r = p * kRowsPerPart; r < std::min(N, (p + 1) * kRowsPerPart); r++) {
                const float* x = inp + r * C3;
                const float* dy = dout + r * C3;
                float* dx = dinp + r * C3;
                for (int h = 0; h < heads; h++)
                    norm_head_backward(dx + h * HS, h < NH ? dq : dk, dy + h * HS, x + h * HS,
                                       h < NH ? q_weight : k_weight, rstd[r * heads + h], HS, tmp.data());
                if (dx != dy)
                    std::memcpy(dx + heads * HS, dy + heads * HS, sizeof(float) * static_cast<size_t>(KV) * HS);
            }
        }
    }
    for (int64_t p = 0; p < parts; p++)
        for (int c = 0; c < HS; c++) {
            dq_weight[c] += partial[static_cast<size_t>(p * 2 * HS + c)];
            dk_weight[c] += partial[static_cast<size_t>(p * 2 * HS + HS + c)];
        }
}

}  // namespace llmt::kernels::cpu
