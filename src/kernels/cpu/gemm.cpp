// GEMM backend dispatch: OpenBLAS cblas_sgemm and oneDNN dnnl_sgemm (both row-major here).
#include "kernels/cpu/gemm.h"

#include <cblas.h>

#include "core/check.h"
#include "core/error.h"
#include "core/knobs.h"
#include "kernels/cpu/bf16_isa.h"
#include "kernels/cpu/threads.h"

#if LLMT_HAVE_ONEDNN
#include <dnnl.h>
#endif

namespace llmt::kernels::cpu {
namespace {

GemmBackend default_backend() {
#if LLMT_HAVE_ONEDNN
    // bench/gemm: oneDNN is 2-3x faster than OpenBLAS (pinned to its AVX2 kernels) on every GPT-2
    // training shape measured on the AVX-512 EPYC these numbers come from (docs/benchmarks.md).
    return GemmBackend::kOneDnn;
#else
    return GemmBackend::kOpenBlas;
#endif
}

}  // namespace

// LLMTRAIN_GEMM (core/knobs.h): auto|onednn|openblas. A build without oneDNN asked for it throws at the
// first GEMM (sgemm_with), outside any parallel region: sgemm_serial then returns false.
GemmBackend gemm_backend() {
    switch (knob_choice(Knob::kGemm)) {
        case 1: return GemmBackend::kOneDnn;
        case 2: return GemmBackend::kOpenBlas;
        default: return default_backend();
    }
}

bool gemm_backend_available(GemmBackend backend) {
    return backend == GemmBackend::kOpenBlas || LLMT_HAVE_ONEDNN;
}

const char* gemm_backend_name(GemmBackend backend) {
    return backend == GemmBackend::kOneDnn ? "onednn" : "openblas";
}

const char* gemm_backend_name() { return gemm_backend_name(gemm_backend()); }

void sgemm_with(GemmBackend backend, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                float alpha, const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                float* C, int64_t ldc) {
    if (M == 0 || N == 0) return;
    if (K == 0) {
        // Both libraries accept K == 0, but not every version skips reading C when beta == 0.
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
        return;
    }
    if (backend == GemmBackend::kOneDnn) {
#if LLMT_HAVE_ONEDNN
        (void)bf16_facts();  // before oneDNN's first call: it may cap oneDNN's ISA (bf16_isa.h)
        const dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A,
                                            lda, B, ldb, beta, C, ldc);
        LLMT_CHECK_AS(DeviceError, st == dnnl_success,
                      "dnnl_sgemm failed with status {} (M={} N={} K={} lda={} ldb={} ldc={})",
                      static_cast<int>(st), M, N, K, lda, ldb, ldc);
        return;
#else
        throw DeviceError("GEMM backend 'onednn' is not compiled in");
#endif
    }
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), alpha, A,
                static_cast<int>(lda), B, static_cast<int>(ldb), beta, C,
                static_cast<int>(ldc));
}

bool sgemm_serial_available() {
    return gemm_backend() == GemmBackend::kOneDnn && gemm_backend_available(GemmBackend::kOneDnn);
}

bool sgemm_serial(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                  int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
#if LLMT_HAVE_ONEDNN
    if (gemm_backend() != GemmBackend::kOneDnn) return false;
    if (M == 0 || N == 0) return true;
    // No throwing inside parallel regions: a failed call is an internal error (shapes are validated).
    const dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda, B,
                                        ldb, beta, C, ldc);
    LLMT_ASSERT(st == dnnl_success);
    return true;
#else
    (void)trans_a, (void)trans_b, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda, (void)B;
    (void)ldb, (void)beta, (void)C, (void)ldc;
    return false;
#endif
}

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
    // oneDNN sizes its OpenMP team from omp_get_max_threads() at the call: small GEMMs (decode) get fewer
    // threads (threads.h). OpenBLAS's pthreads build keeps its own pool and ignores this.
    const ScopedOmpThreads threads(threads_for_flops(2.0 * static_cast<double>(M) * N * K));
    sgemm_with(gemm_backend(), trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace llmt::kernels::cpu
