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
                    const blasint lda, const float* B, const blasint ldb, const float beta, float* C,
                    const blasint ldc),
                   (order, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))

#if LLMT_HAVE_ONEDNN
LLMT_LAZY_FUNCTION(onednn_library(), dnnl_status_t, dnnl_sgemm,
                   (char ta, char tb, dnnl_dim_t M, dnnl_dim_t N, dnnl_dim_t K, float alpha, const float* A,
                    dnnl_dim_t lda, const float* B, dnnl_dim_t ldb, float beta, float* C, dnnl_dim_t ldc),
                   (ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))

// oneDNN's matmul primitive, for bf16 GEMMs (gemm_bf16.cpp).
#define LLMT_DNNL(ret, name, params, args) LLMT_LAZY_FUNCTION(onednn_library(), ret, name, params, args)
LLMT_DNNL(dnnl_status_t, dnnl_engine_create, (dnnl_engine_t* e, dnnl_engine_kind_t k, size_t i), (e, k, i))
LLMT_DNNL(dnnl_status_t, dnnl_stream_create, (dnnl_stream_t* s, dnnl_engine_t e, unsigned f), (s, e, f))
LLMT_DNNL(dnnl_status_t, dnnl_stream_wait, (dnnl_stream_t s), (s))
LLMT_DNNL(dnnl_status_t, dnnl_memory_desc_init_by_strides,
          (dnnl_memory_desc_t* md, int nd, const dnnl_dims_t dims, dnnl_data_type_t dt, const dnnl_dims_t st),
          (md, nd, dims, dt, st))
LLMT_DNNL(dnnl_status_t, dnnl_memory_create,
          (dnnl_memory_t* m, const dnnl_memory_desc_t* md, dnnl_engine_t e, void* h), (m, md, e, h))
LLMT_DNNL(dnnl_status_t, dnnl_memory_destroy, (dnnl_memory_t m), (m))
LLMT_DNNL(dnnl_status_t, dnnl_matmul_desc_init,
          (dnnl_matmul_desc_t* d, const dnnl_memory_desc_t* s, const dnnl_memory_desc_t* w,
           const dnnl_memory_desc_t* b, const dnnl_memory_desc_t* o),
          (d, s, w, b, o))
LLMT_DNNL(dnnl_status_t, dnnl_primitive_attr_create, (dnnl_primitive_attr_t* a), (a))
LLMT_DNNL(dnnl_status_t, dnnl_primitive_attr_destroy, (dnnl_primitive_attr_t a), (a))
LLMT_DNNL(dnnl_status_t, dnnl_post_ops_create, (dnnl_post_ops_t* p), (p))
LLMT_DNNL(dnnl_status_t, dnnl_post_ops_destroy, (dnnl_post_ops_t p), (p))
LLMT_DNNL(dnnl_status_t, dnnl_post_ops_append_sum, (dnnl_post_ops_t p, float s), (p, s))
LLMT_DNNL(dnnl_status_t, dnnl_primitive_attr_set_post_ops, (dnnl_primitive_attr_t a, const_dnnl_post_ops_t p),
          (a, p))
LLMT_DNNL(dnnl_status_t, dnnl_primitive_desc_create,
          (dnnl_primitive_desc_t* pd, const_dnnl_op_desc_t d, const_dnnl_primitive_attr_t a, dnnl_engine_t e,
           const_dnnl_primitive_desc_t h),
          (pd, d, a, e, h))
LLMT_DNNL(dnnl_status_t, dnnl_primitive_desc_destroy, (dnnl_primitive_desc_t pd), (pd))
LLMT_DNNL(dnnl_status_t, dnnl_primitive_desc_query,
          (const_dnnl_primitive_desc_t pd, dnnl_query_t q, int i, void* r), (pd, q, i, r))
LLMT_DNNL(dnnl_status_t, dnnl_primitive_create, (dnnl_primitive_t* p, const_dnnl_primitive_desc_t pd), (p, pd))
LLMT_DNNL(dnnl_status_t, dnnl_primitive_execute,
          (const_dnnl_primitive_t p, dnnl_stream_t s, int n, const dnnl_exec_arg_t* a), (p, s, n, a))
// The ISA oneDNN may dispatch to (bf16_isa.h) and its version (the probe's cache key, train/cpu_precision.h).
LLMT_DNNL(dnnl_status_t, dnnl_set_max_cpu_isa, (dnnl_cpu_isa_t isa), (isa))
LLMT_DNNL(dnnl_cpu_isa_t, dnnl_get_effective_cpu_isa, (void), ())
LLMT_DNNL(const dnnl_version_t*, dnnl_version, (void), ())
#undef LLMT_DNNL
#endif
