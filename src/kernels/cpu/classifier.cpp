// Fused softmax + cross-entropy (classifier.h). Per row: max, then exp(x - max) stored in place and
// summed, then one scaling pass; each row (Vp floats, 200 KB for GPT-2) stays in L2 between passes.
// The row primitives are vec.h's (AVX-512 / AVX2 / scalar).
#include "kernels/cpu/classifier.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>

#include "kernels/cpu/vec.h"

namespace llmt::kernels::cpu {

void classifier_forward(float* losses, const float* logits, const int32_t* targets, int B, int T, int V,
                        int Vp) {
    const long rows = static_cast<long>(B) * T;
#pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++) {
        const int32_t y = targets[r];
        if (y < 0) {
            losses[r] = 0.0f;
            continue;
        }
        const float* x = logits + static_cast<size_t>(r) * Vp;
        const float m = vec::row_max(x, V);
        const float s = vec::row_exp_sum(nullptr, x, V, m);
        losses[r] = m + std::log(s) - x[y];
    }
}

void classifier_forward_backward(float* losses, float* logits, const int32_t* targets, float dloss_scale,
                                 int B, int T, int V, int Vp) {
    const long rows = static_cast<long>(B) * T;
#pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++) {
        float* x = logits + static_cast<size_t>(r) * Vp;
        const int32_t y = targets[r];
        if (y < 0) {
            losses[r] = 0.0f;
            std::memset(x, 0, sizeof(float) * static_cast<size_t>(Vp));
            continue;
        }
        const float xy = x[y];
        const float m = vec::row_max(x, V);
        const float s = vec::row_exp_sum(x, x, V, m);  // x now holds exp(x - m)
        losses[r] = m + std::log(s) - xy;
        vec::row_scale(x, V, dloss_scale / s);
        x[y] -= dloss_scale;
        if (Vp > V) std::memset(x + V, 0, sizeof(float) * static_cast<size_t>(Vp - V));
    }
}

void classifier_predict(int32_t* preds, float* loss_sum, const float* logits, const float* losses,
                        const int32_t* targets, int B, int V, int Vp) {
    double sum = 0;
    for (int r = 0; r < B; r++) {
        const float* x = logits + static_cast<size_t>(r) * Vp;
        int best = 0;
        for (int c = 1; c < V; c++)
            if (x[best] < x[c]) best = c;  // std::max_element's test: the first maximum wins
        preds[r] = best;
        if (targets[r] >= 0) sum += losses[r];
    }
    loss_sum[0] = static_cast<float>(sum);
    loss_sum[1] = static_cast<float>(sum - static_cast<double>(loss_sum[0]));
}

void softmax_forward(float* probs, const float* logits, int B, int T, int V, int Vp) {
    const long rows = static_cast<long>(B) * T;
#pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++) {
        const float* x = logits + static_cast<size_t>(r) * Vp;
        float* p = probs + static_cast<size_t>(r) * Vp;
        const float m = vec::row_max(x, V);
        const float s = vec::row_exp_sum(p, x, V, m);
        vec::row_scale(p, V, 1.0f / s);
        if (Vp > V) std::memset(p + V, 0, sizeof(float) * static_cast<size_t>(Vp - V));
    }
}

}  // namespace llmt::kernels::cpu
