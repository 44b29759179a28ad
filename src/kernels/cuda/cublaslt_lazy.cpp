// cuBLASLt loaded on first use (core/lazy_library.h): the binary does not link libcublasLt (540 MB, mapped
// and relocated at every start-up when linked), so only a process that runs a CUDA GEMM loads it. Each
// function matmul.cu calls is defined here with cublasLt.h's prototype and forwards to the library's.
#include <cublasLt.h>

#include <string>

#include "core/lazy_library.h"

namespace {


const llmt::LazyLibrary& cublaslt_library() {
    // The soname of the major version the headers declare, then the toolkit directory found at build time.
    static const llmt::LazyLibrary lib(
        {"libcublasLt.so." LLMT_LAZY_STR(CUBLAS_VER_MAJOR),
         LLMT_CUDA_LIBRARY_DIR "/libcublasLt.so." LLMT_LAZY_STR(CUBLAS_VER_MAJOR)},
        "cuBLASLt " LLMT_LAZY_STR(CUBLAS_VER_MAJOR),
        "install the CUDA runtime libraries (libcublasLt) or put their directory on LD_LIBRARY_PATH");
    return lib;
}

}  // namespace

LLMT_LAZY_FUNCTION(cublaslt_library(), cublasStatus_t, cublasLtCreate, (cublasLtHandle_t * h), (h))
LLMT_LAZY_FUNCTION(cublaslt_library(), cublasStatus_t, cublasLtMatmulDescCreate,
                   (cublasLtMatmulDesc_t * desc, cublasComputeType_t compute, cudaDataType_t scale),
                   (desc, compute, scale))
LLMT_LAZY_FUNCTION(cublaslt_library(), cublasStatus_t, cublasLtMatmulDescSetAttribute,
                   (cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const void* buf, size_t size),
                   (desc, attr, buf, size))
LLMT_LAZY_FUNCTION(cublaslt_library(), cublasStatus_t, cublasLtMatrixLayoutCreate,
                   (cublasLtMatrixLayout_t * layout, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld),
                   (layout, type, rows, cols, ld))
LLMT_LAZY_FUNCTION(cublaslt_library(), cublasStatus_t, cublasLtMatmulPreferenceCreate,
                   (cublasLtMatmulPreference_t * pref), (pref))
LLMT_LAZY_FUNCTION(cublaslt_library(), cublasStatus_t, cublasLtMatmulPreferenceSetAttribute,
                   (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                    size_t size),
                   (pref, attr, buf, size))
LLMT_LAZY_FUNCTION(cublaslt_library(), cublasStatus_t, cublasLtMatmulPreferenceDestroy,
                   (cublasLtMatmulPreference_t pref), (pref))
LLMT_LAZY_FUNCTION(cublaslt_library(), cublasStatus_t, cublasLtMatmulAlgoGetHeuristic,
                   (cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                    cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t pref, int requested,
                    cublasLtMatmulHeuristicResult_t results[], int* returned),
                   (h, op, a, b, c, d, pref, requested, results, returned))
LLMT_LAZY_FUNCTION(cublaslt_library(), cublasStatus_t, cublasLtMatmul,
                   (cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,
                    cublasLtMatrixLayout_t a, const void* B, cublasLtMatrixLayout_t b, const void* beta,
                    const void* C, cublasLtMatrixLayout_t c, void* D, cublasLtMatrixLayout_t d,
                    const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspace_bytes, cudaStream_t stream),
                   (h, desc, alpha, A, a, B, b, beta, C, c, D, d, algo, workspace, workspace_bytes, stream))
