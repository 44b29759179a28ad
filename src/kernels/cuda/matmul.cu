// Linear layer on CUDA (cuda/matmul.h). cuBLASLt is column-major: a row-major (R, K) matrix is a
// column-major (K, R) one, so each product below is written for the transposed outputs.
// dbias is a column-sum kernel (cuBLASLt's BGRADB epilogue overwrites instead of accumulating).
#include <cstdlib>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/runtime.h"

namespace llmt::kernels::cuda {
namespace {

// D (m, n; column-major, ldd) = alpha op(A) op(B) + beta D [+ bias (m) broadcast over columns].
// op(A) is (m, k): A is stored (m, k) col-major when !ta, (k, m) when ta; likewise op(B) is (k, n).
void lt_matmul(float* D, const float* A, const float* Bm, const float* bias, int m, int n, int k, bool ta, bool tb,
               int lda, int ldb, int ldd, float beta, cudaStream_t stream) {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    // Release the descriptors on every path, including a throwing check.
    struct Cleanup {
        cublasLtMatmulDesc_t& d;
        cublasLtMatrixLayout_t &a, &b, &c;
        cublasLtMatmulPreference_t& p;
        ~Cleanup() {
            if (p) cublasLtMatmulPreferenceDestroy(p);
            if (c) cublasLtMatrixLayoutDestroy(c);
            if (b) cublasLtMatrixLayoutDestroy(b);
            if (a) cublasLtMatrixLayoutDestroy(a);
            if (d) cublasLtMatmulDescDestroy(d);
        }
    } cleanup{desc, la, lb, ld, pref};

    // LLMTRAIN_CUDA_TF32=1 trades fp32 exactness (~3e-4 relative) for the tensor cores' TF32 rate.
    static const bool tf32 = [] {
        const char* v = std::getenv("LLMTRAIN_CUDA_TF32");
        return v && v[0] == '1';
    }();
    LLMT_CUBLAS_CHECK(
        cublasLtMatmulDescCreate(&desc, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    LLMT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)));
    LLMT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)));
    if (bias) {
        const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        LLMT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
        LLMT_CUBLAS_CHECK(
            cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    LLMT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, ta ? k : m, ta ? m : k, lda));
    LLMT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, tb ? n : k, tb ? k : n, ldb));
    LLMT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, ldd));
    LLMT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const size_t ws = cublaslt_workspace_size();
    LLMT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                           sizeof(ws)));
    cublasLtMatmulHeuristicResult_t heur{};
    int found = 0;
    LLMT_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(cublaslt(), desc, la, lb, ld, ld, pref, 1, &heur, &found));
    if (found == 0) LLMT_CUBLAS_CHECK(CUBLAS_STATUS_NOT_SUPPORTED);  // no algorithm for this shape/epilogue
    const float alpha = 1.0f;
    LLMT_CUBLAS_CHECK(cublasLtMatmul(cublaslt(), desc, &alpha, A, la, Bm, lb, &beta, D, ld, D, ld, &heur.algo,
                                     cublaslt_workspace(), ws, stream));
}

// dbias (OC) += sum over rows of dout (rows, OC). Block: 32 columns x 8 row lanes; grid.y splits rows.
__global__ void bias_grad_kernel(float* dbias, const float* dout, int rows, int OC, int rows_per_block) {
    __shared__ float part[8][33];
    const int col = blockIdx.x * 32 + threadIdx.x;
    const int r0 = blockIdx.y * rows_per_block;
    const int r1 = min(rows, r0 + rows_per_block);
    float s = 0.0f;
    if (col < OC)
        for (int r = r0 + threadIdx.y; r < r1; r += 8) s += dout[static_cast<long>(r) * OC + col];
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && col < OC) {
        float t = 0.0f;
        for (int i = 0; i < 8; i++) t += part[i][threadIdx.x];
        atomicAdd(&dbias[col], t);
    }
}

}  // namespace

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int BT, int C, int OC,
                    cudaStream_t stream) {
    // out^T (OC, BT) = W (col-major (C, OC), transposed) * inp^T (col-major (C, BT)).
    lt_matmul(out, weight, inp, bias, OC, BT, C, true, false, C, C, OC, 0.0f, stream);
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int BT, int C, int OC, cudaStream_t stream) {
    // dinp^T (C, BT) = W (col-major (C, OC)) * dout^T (col-major (OC, BT)).
    if (dinp) lt_matmul(dinp, weight, dout, nullptr, C, BT, OC, false, false, C, OC, C, 0.0f, stream);
    // dW^T (C, OC) += inp^T (col-major (C, BT)) * dout (col-major (OC, BT), transposed).
    lt_matmul(dweight, inp, dout, nullptr, C, OC, BT, false, true, C, OC, C, 1.0f, stream);
    if (dbias) {
        constexpr int kRowsPerBlock = 256;
        const dim3 grid(static_cast<unsigned>((OC + 31) / 32),
                        static_cast<unsigned>((BT + kRowsPerBlock - 1) / kRowsPerBlock));
        bias_grad_kernel<<<grid, dim3(32, 8), 0, stream>>>(dbias, dout, BT, OC, kRowsPerBlock);
        LLMT_CUDA_CHECK_LAUNCH("bias_grad_kernel");
    }
}

}  // namespace llmt::kernels::cuda
