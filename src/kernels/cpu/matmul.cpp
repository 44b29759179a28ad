// Linear layer forward/backward as three GEMMs plus a bias add / column sum.
#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <cstddef>
#include <vector>

#include "kernels/cpu/gemm.h"

namespace llmt::kernels::cpu {

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int BT, int C,
                    int OC) {
    sgemm(false, true, BT, OC, C, 1.0f, inp, C, weight, C, 0.0f, out, OC);
    if (!bias) return;
#pragma omp parallel for schedule(static)
    for (int r = 0; r < BT; r++) {
        float* o = out + static_cast<size_t>(r) * OC;
#pragma omp simd
        for (int j = 0; j < OC; j++) o[j] += bias[j];
    }
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int BT, int C, int OC) {
    if (dinp) sgemm(false, false, BT, C, OC, 1.0f, dout, OC, weight, C, 0.0f, dinp, C);
    if (dweight) sgemm(true, false, OC, C, BT, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
    if (!dbias) return;
    // Column sums: each thread owns a slice of columns and walks all rows (no write sharing).
    constexpr int kCols = 256;
    const int nblk = (OC + kCols - 1) / kCols;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
        const int j0 = blk * kCols, j1 = std::min(OC, j0 + kCols);
        float acc[kCols] = {};
        for (int r = 0; r < BT; r++) {
            const float* d = dout + static_cast<size_t>(r) * OC;
#pragma omp simd
            for (int j = j0; j < j1; j++) acc[j - j0] += d[j];
        }
        for (int j = j0; j < j1; j++) dbias[j] += acc[j - j0];
    }
}

}  // namespace llmt::kernels::cpu
