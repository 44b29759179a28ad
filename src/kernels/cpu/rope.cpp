// RoPE forward/backward (rope.h): one (b, t) row per OpenMP iteration; each of its NH + KV rotated heads
// reads the row's cos/sin once per pair. The backward is the same loop with sin negated.
#include "kernels/cpu/rope.h"

#include <cstdint>

namespace llmt::kernels::cpu {
namespace {

// sign +1: rotate by a (forward); -1: by -a (backward, the transpose). Row r = (b, t) uses table row
// positions[r] when given, else pos0 + t.
void rope_apply(float* qkv, const float* rope, int B, int T, int NH, int KV, int HS, int pos0,
                const int32_t* positions, float sign) {
    const int half = HS / 2, heads = NH + KV;
    const int64_t C3 = static_cast<int64_t>(NH + 2 * KV) * HS;
    const long rows = static_cast<long>(B) * T;
#pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++) {
        const int t = static_cast<int>(r % T);
        const int p = positions ? positions[r] : pos0 + t;
        const float* cs = rope + static_cast<int64_t>(p) * HS;
        const float* sn = cs + half;
        float* row = qkv + r * C3;
        for (int h = 0; h < heads; h++) {  // q heads, then the k heads right after them
            float* x = row + static_cast<int64_t>(h) * HS;
#pragma omp simd
            for (int i = 0; i < half; i++) {
                const float c = cs[i], s = sign * sn[i];
                const float x0 = x[i], x1 = x[i + half];
                x[i] = x0 * c - x1 * s;
                x[i + half] = x1 * c + x0 * s;
            }
        }
    }
}

}  // namespace

void rope_forward(float* qkv, const float* rope, int B, int T, int NH, int KV, int HS, int pos0,
                  const int32_t* positions) {
    rope_apply(qkv, rope, B, T, NH, KV, HS, pos0, positions, 1.0f);
}

void rope_backward(float* dqkv, const float* rope, int B, int T, int NH, int KV, int HS, const int32_t* positions) {
    rope_apply(dqkv, rope, B, T, NH, KV, HS, 0, positions, -1.0f);
}

}  // namespace llmt::kernels::cpu
