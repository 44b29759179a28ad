// The CPU GEMM libraries loaded on first use (core/lazy_library.h): the binary links neither OpenBLAS
// (whose load-time constructor starts its thread pool) nor oneDNN, so commands that run no CPU GEMM
// (`version`, `serve`, `k8s`, the launcher, GPU training) load neither, and CPU training loads only the
// one gemm.h picks. The two functions gemm.cpp calls are defined here with the headers' prototypes.
#include <cblas.h>

#include "core/lazy_library.h"

#if LLMT_HAVE_ONEDNN
#include <dnnl.h>
#endif

namespace {

const llmt::LazyLibrary& openblas_library() {
    static const llmt::LazyLibrary lib({"libopenblas.so.0", LLMT_OPENBLAS_LIBRARY}, "OpenBLAS",
                                       "install libopenblas0 (Debian) or put it on LD_LIBRARY_PATH");
    return lib;
}

#if LLMT_HAVE_ONEDNN
const llmt::LazyLibrary& onednn_library() {
    static const llmt::LazyLibrary lib({"libdnnl.so." LLMT_LAZY_STR(DNNL_VERSION_MAJOR), LLMT_ONEDNN_LIBRARY},
                                       "oneDNN " LLMT_LAZY_STR(DNNL_VERSION_MAJOR),
                                       "install libdnnl (Debian: libdnnl2) or run with LLMTRAIN_GEMM=openblas");
    return lib;
}
#endif

}  // namespace

LLMT_LAZY_FUNCTION(openblas_library(), void, cblas_sgemm,
                   (const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE ta, const enum CBLAS_TRANSPOSE tb,
                    const blasint M, const blasint N, const blasint K, const float alpha, const float* A,
                    const blasint lda, const float* B, const blasint ldb, const float beta, float* C, const blasint ldc),
                   (order, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))

#if LLMT_HAVE_ONEDNN
LLMT_LAZY_FUNCTION(onednn_library(), dnnl_status_t, dnnl_sgemm,
                   (char ta, char tb, dnnl_dim_t M, dnnl_dim_t N, dnnl_dim_t K, float alpha, const float* A,
                    dnnl_dim_t lda, const float* B, dnnl_dim_t ldb, float beta, float* C, dnnl_dim_t ldc),
                   (ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))
#endif
