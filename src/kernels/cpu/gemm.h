// Single-precision GEMM behind one signature, with the backend picked at run time: OpenBLAS
// (cblas_sgemm) or oneDNN (dnnl_sgemm, which dispatches to AVX-512 / AVX2 kernels itself).
// The default is the one measured faster on GPT-2 training shapes (bench/gemm, docs/benchmarks.md);
// the knob LLMTRAIN_GEMM=auto|onednn|openblas (core/knobs.h) overrides it; tests set it with ScopedKnob.
// Thread safety: all functions are thread-safe.
#pragma once

#include <cstdint>

namespace llmt::kernels::cpu {

enum class GemmBackend : uint8_t { kOpenBlas, kOneDnn };

// C (M,N) = alpha * op(A) @ op(B) + beta * C, all row-major with leading dimensions lda/ldb/ldc.
// op(A) is (M,K): A is (M,K) when !trans_a, (K,M) when trans_a; likewise op(B) is (K,N).
// beta == 0 overwrites C without reading it (NaNs in C do not propagate).
void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// The same on an explicit backend (tests and bench). Throws DeviceError when `backend` is not
// compiled in.
void sgemm_with(GemmBackend backend, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                float alpha, const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                float* C, int64_t ldc);

// C = alpha op(A) op(B) + beta C on the calling thread only, for GEMMs issued from inside an OpenMP
// parallel region (attention's per-head blocks). Only oneDNN guarantees this (it runs single-threaded
// inside a parallel region); returns false without computing when oneDNN is not the current backend, and
// the caller takes its non-GEMM path.
bool sgemm_serial(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                  int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// True when sgemm_serial computes (oneDNN is the current backend and compiled in): callers that split work over
// OpenMP threads with one single-threaded GEMM each check it before opening the parallel region.
bool sgemm_serial_available();

// Current backend: the knob LLMTRAIN_GEMM if set, else the default. Never throws.
GemmBackend gemm_backend();
bool gemm_backend_available(GemmBackend backend);
// "onednn" / "openblas", for `llmtrain version` and logs.
const char* gemm_backend_name();
const char* gemm_backend_name(GemmBackend backend);

}  // namespace llmt::kernels::cpu
