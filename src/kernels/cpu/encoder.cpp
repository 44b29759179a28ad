// Token + position embedding forward/backward (llm.c train_gpt2.c encoder_forward/backward).
#include "kernels/cpu/encoder.h"

#include <omp.h>

#include <algorithm>
#include <cstddef>

namespace llmt::kernels::cpu {

void encoder_forward(float* out, const int32_t* inp, const float* wte, const float* wpe, int B, int T,
                     int C) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            float* o = out + (static_cast<size_t>(b) * T + t) * C;
            const float* e = wte + static_cast<size_t>(inp[b * T + t]) * C;
            if (!wpe) {
                for (int c = 0; c < C; c++) o[c] = e[c];
                continue;
            }
            const float* p = wpe + static_cast<size_t>(t) * C;
            for (int c = 0; c < C; c++) o[c] = e[c] + p[c];
        }
    }
}

void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B, int T,
                      int C) {
    // The same token can appear at many (b,t): split the channels across threads instead of the rows,
    // so each thread owns a column slice of dwte/dwpe and no two threads write the same float.
#pragma omp parallel
    {
        const int nth = omp_get_num_threads(), ith = omp_get_thread_num();
        const int chunk = (C + nth - 1) / nth;
        const int c0 = std::min(C, ith * chunk), c1 = std::min(C, c0 + chunk);
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < T; t++) {
                const float* d = dout + (static_cast<size_t>(b) * T + t) * C;
                float* e = dwte + static_cast<size_t>(inp[b * T + t]) * C;
                for (int c = c0; c < c1; c++) e[c] += d[c];
                if (!dwpe) continue;
                float* p = dwpe + static_cast<size_t>(t) * C;
                for (int c = c0; c < c1; c++) p[c] += d[c];
            }
        }
    }
}

}  // namespace llmt::kernels::cpu
