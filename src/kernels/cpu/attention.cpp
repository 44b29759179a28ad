// Causal self-attention forward/backward (attention.h). Each (batch, head) pair is one task: it reads
// its q/k/v columns, writes its own out/dqkv columns, so tasks never share a written float.
#include "kernels/cpu/attention.h"

#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/simd.h"

namespace llmt::kernels::cpu {
namespace {

inline float dot(const float* a, const float* b, int n) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

inline void axpy(float* y, float a, const float* x, int n) {
#pragma omp simd
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

// One (b, h): rows t = 0..T-1 of this head. `scores` holds T floats.
LLMT_CPU_CLONES
void attention_forward_head(float* out, float* lse, const float* qkv, float* scores, int T, int C, int HS,
                            float scale) {
    const size_t C3 = 3 * static_cast<size_t>(C);
    for (int t = 0; t < T; t++) {
        const float* q = qkv + t * C3;
        float mx = -std::numeric_limits<float>::infinity();
        for (int j = 0; j <= t; j++) {
            const float s = scale * dot(q, qkv + j * C3 + C, HS);
            scores[j] = s;
            mx = s > mx ? s : mx;
        }
        float sum = 0.0f;
        for (int j = 0; j <= t; j++) {
            const float e = std::exp(scores[j] - mx);
            scores[j] = e;
            sum += e;
        }
        const float inv = 1.0f / sum;
        float* o = out + static_cast<size_t>(t) * C;
        std::memset(o, 0, sizeof(float) * static_cast<size_t>(HS));
        for (int j = 0; j <= t; j++) axpy(o, scores[j] * inv, qkv + j * C3 + 2 * C, HS);
        lse[t] = mx + std::log(sum);
    }
}

LLMT_CPU_CLONES
void attention_backward_head(float* dqkv, const float* dout, const float* qkv, const float* out,
                             const float* lse, int T, int C, int HS, float scale) {
    const size_t C3 = 3 * static_cast<size_t>(C);
    for (int t = 0; t < T; t++) {
        float* d = dqkv + t * C3;
        std::memset(d, 0, sizeof(float) * static_cast<size_t>(HS));
        std::memset(d + C, 0, sizeof(float) * static_cast<size_t>(HS));
        std::memset(d + 2 * C, 0, sizeof(float) * static_cast<size_t>(HS));
    }
    for (int t = 0; t < T; t++) {
        const float* q = qkv + t * C3;
        const float* dy = dout + static_cast<size_t>(t) * C;
        // D_t = sum_j p_tj dp_tj = dout_t . out_t (FlashAttention-2, eq. for dS)
        const float D = dot(dy, out + static_cast<size_t>(t) * C, HS);
        const float l = lse[t];
        float* dq = dqkv + t * C3;
        for (int j = 0; j <= t; j++) {
            const float* k = qkv + j * C3 + C;
            const float* v = qkv + j * C3 + 2 * C;
            const float p = std::exp(scale * dot(q, k, HS) - l);
            const float dp = dot(dy, v, HS);
            const float ds = p * (dp - D) * scale;
            axpy(dqkv + j * C3 + 2 * C, p, dy, HS);  // dv_j += p dout_t
            axpy(dq, ds, k, HS);                     // dq_t += scale ds k_j
            axpy(dqkv + j * C3 + C, ds, q, HS);      // dk_j += scale ds q_t
        }
    }
}

}  // namespace

void attention_forward(float* out, float* lse, const float* qkv, int B, int T, int C, int NH) {
    const int HS = C / NH;
    const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
#pragma omp parallel
    {
        std::vector<float> scores(static_cast<size_t>(T));
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                attention_forward_head(out + static_cast<size_t>(b) * T * C + h * HS,
                                       lse + (static_cast<size_t>(b) * NH + h) * T,
                                       qkv + static_cast<size_t>(b) * T * 3 * C + h * HS, scores.data(), T,
                                       C, HS, scale);
            }
        }
    }
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, int B, int T, int C, int NH) {
    const int HS = C / NH;
    const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const size_t bt = static_cast<size_t>(b) * T;
            attention_backward_head(dqkv + bt * 3 * C + h * HS, dout + bt * C + h * HS,
                                    qkv + bt * 3 * C + h * HS, out + bt * C + h * HS,
                                    lse + (static_cast<size_t>(b) * NH + h) * T, T, C, HS, scale);
        }
    }
}

}  // namespace llmt::kernels::cpu
