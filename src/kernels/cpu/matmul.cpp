// Linear layer forward/backward as three GEMMs plus a bias add / column sum.
#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <cstddef>
#include <vector>

#include <atomic>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16.h"

namespace llmt::kernels::cpu {
namespace {

std::atomic<MatmulPrecision> g_precision{MatmulPrecision::kF32};

// C = op(A) op(B) + beta C (beta 0 or 1) in precision p.
void linear_gemm(MatmulPrecision p, bool ta, bool tb, int M, int N, int K, const float* A, int lda, const float* B,
                 int ldb, float beta, float* C, int ldc) {
    if (p == MatmulPrecision::kBF16)
        return gemm_bf16(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
    sgemm(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace

void set_matmul_precision(MatmulPrecision p) { g_precision.store(p); }

MatmulPrecision matmul_precision() { return g_precision.load(); }

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int BT, int C,
                    int OC, MatmulPrecision precision) {
    linear_gemm(precision, false, true, BT, OC, C, inp, C, weight, C, 0.0f, out, OC);
    if (!bias) return;
#pragma omp parallel for schedule(static)
    for (int r = 0; r < BT; r++) {
        float* o = out + static_cast<size_t>(r) * OC;
#pragma omp simd
        for (int j = 0; j < OC; j++) o[j] += bias[j];
    }
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int BT, int C, int OC, MatmulPrecision precision) {
    if (dinp) linear_gemm(precision, false, false, BT, C, OC, dout, OC, weight, C, 0.0f, dinp, C);
    if (dweight) linear_gemm(precision, true, false, OC, C, BT, dout, OC, inp, C, 1.0f, dweight, C);
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
