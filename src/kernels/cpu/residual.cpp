// Residual add forward/backward (llm.c train_gpt2.c residual_*). Simple enough for the compiler to
// vectorise; memory-bound either way.
#include "kernels/cpu/residual.h"

namespace llmt::kernels::cpu {

void residual_forward(float* out, const float* inp1, const float* inp2, size_t N) {
    const long n = static_cast<long>(N);
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; i++) out[i] = inp1[i] + inp2[i];
}

void residual_backward(float* dinp1, float* dinp2, const float* dout, size_t N) {
    const long n = static_cast<long>(N);
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; i++) {
        dinp1[i] += dout[i];
        dinp2[i] += dout[i];
    }
}

}  // namespace llmt::kernels::cpu
