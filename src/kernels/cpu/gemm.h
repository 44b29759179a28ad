// Single-precision GEMM behind one signature, with the backend picked at run time: OpenBLAS
// (cblas_sgemm) or oneDNN (dnnl_sgemm, which dispatches to AVX-512 / AVX2 kernels itself).
// The default is the one measured faster on GPT-2 training shapes (bench/gemm, docs/benchmarks.md);
// env LLMTRAIN_GEMM=openblas|onednn overrides it for tests and benchmarks.
// Thread safety: sgemm is thread-safe; set_gemm_backend is not (call it before training starts).
#pragma once

#include <cstdint>
#include <string_view>

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

// Current backend: LLMTRAIN_GEMM if set (InputError on an unknown value), else the default.
GemmBackend gemm_backend();
void set_gemm_backend(GemmBackend backend);
bool gemm_backend_available(GemmBackend backend);
// "onednn" / "openblas", for `llmtrain version` and logs.
const char* gemm_backend_name();
const char* gemm_backend_name(GemmBackend backend);
// Parses "openblas" / "onednn"; throws InputError naming `what` otherwise.
GemmBackend parse_gemm_backend(std::string_view name, std::string_view what);

}  // namespace llmt::kernels::cpu
