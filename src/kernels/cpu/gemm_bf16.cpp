// bf16 GEMM on oneDNN's matmul primitive: operands rounded into per-thread scratch buffers, one primitive per
// (shape, transposes, beta, thread count) kept for the process (creating one costs ~100 us; a training step
// reuses a handful of shapes).
#include "kernels/cpu/gemm_bf16.h"

#include <omp.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "core/bf16.h"
#include "core/check.h"
#include "core/error.h"
#include "kernels/cpu/bf16_isa.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/threads.h"

#if LLMT_HAVE_ONEDNN
#include <dnnl.h>
#endif

namespace llmt::kernels::cpu {
namespace {

LLMT_TARGET_AVX512 __attribute__((target("avx512bf16"))) void round_row_bf16(const float* src, int64_t n,
                                                                           uint16_t* dst) {
    int64_t j = 0;
    for (; j + 32 <= n; j += 32) {
        const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + j + 16), _mm512_loadu_ps(src + j));
        _mm512_storeu_si512(dst + j, reinterpret_cast<__m512i>(v));
    }
    for (; j < n; j++) dst[j] = bf16_from_float(src[j]);
}

void round_row_scalar(const float* src, int64_t n, uint16_t* dst) {
    for (int64_t j = 0; j < n; j++) dst[j] = bf16_from_float(src[j]);
}

}  // namespace

void round_to_bf16(const float* src, int64_t rows, int64_t cols, int64_t ld, uint16_t* dst) {
    const bool vec = cpu_features().avx512_bf16 && simd::isa() == simd::Isa::kAvx512;
    // Memory-bound: a thread per core only pays on large operands (~16 KiB per thread at least).
    const int nth = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(omp_get_max_threads(),
                                                                            rows * cols / 4096)));
#pragma omp parallel for schedule(static) num_threads(nth)
    for (int64_t r = 0; r < rows; r++) {
        if (vec) round_row_bf16(src + r * ld, cols, dst + r * cols);
        else round_row_scalar(src + r * ld, cols, dst + r * cols);
    }
}

#if LLMT_HAVE_ONEDNN
namespace {

void check_dnnl(dnnl_status_t st, const char* what) {
    LLMT_CHECK_AS(DeviceError, st == dnnl_success, "oneDNN {} failed with status {}", what, static_cast<int>(st));
}

// One matmul primitive per problem; never destroyed (the process keeps its few shapes until exit).
struct Problem {
    bool trans_a, trans_b;
    int64_t M, N, K, ldc;
    bool accumulate;
    int threads;
    auto key() const { return std::tie(trans_a, trans_b, M, N, K, ldc, accumulate, threads); }
    bool operator<(const Problem& o) const { return key() < o.key(); }
};

struct Matmul {
    dnnl_primitive_t prim = nullptr;
    dnnl_memory_desc_t a{}, b{}, c{};
    std::string impl;
};

class Bf16Engine {
public:
    Bf16Engine() {
        check_dnnl(dnnl_engine_create(&engine_, dnnl_cpu, 0), "engine creation");
        check_dnnl(dnnl_stream_create(&stream_, engine_, dnnl_stream_default_flags), "stream creation");
    }

    const Matmul& get(const Problem& p) {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = cache_.find(p);
        if (it == cache_.end()) it = cache_.emplace(p, create(p)).first;
        return it->second;
    }

    void run(const Matmul& mm, const uint16_t* a, const uint16_t* b, float* c) {
        dnnl_memory_t ma = memory(mm.a, a), mb = memory(mm.b, b), mc = memory(mm.c, c);
        const dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
        const dnnl_status_t st = dnnl_primitive_execute(mm.prim, stream_, 3, args);
        dnnl_memory_destroy(ma);
        dnnl_memory_destroy(mb);
        dnnl_memory_destroy(mc);
        check_dnnl(st, "bf16 matmul");
        check_dnnl(dnnl_stream_wait(stream_), "stream wait");
    }

private:
    dnnl_memory_t memory(const dnnl_memory_desc_t& md, const void* data) {
        dnnl_memory_t m = nullptr;
        check_dnnl(dnnl_memory_create(&m, &md, engine_, const_cast<void*>(data)), "memory creation");
        return m;
    }

    // The operands arrive packed (round_to_bf16): A as stored, (M,K) or (K,M); B likewise. Transposes are
    // strides, which oneDNN's brgemm matmul takes without a copy.
    Matmul create(const Problem& p) {
        Matmul mm;
        const dnnl_dims_t ad = {p.M, p.K}, bd = {p.K, p.N}, cd = {p.M, p.N};
        const dnnl_dims_t as = {p.trans_a ? 1 : p.K, p.trans_a ? p.M : 1};
        const dnnl_dims_t bs = {p.trans_b ? 1 : p.N, p.trans_b ? p.K : 1};
        const dnnl_dims_t cs = {p.ldc, 1};
        check_dnnl(dnnl_memory_desc_init_by_strides(&mm.a, 2, ad, dnnl_bf16, as), "memory desc");
        check_dnnl(dnnl_memory_desc_init_by_strides(&mm.b, 2, bd, dnnl_bf16, bs), "memory desc");
        check_dnnl(dnnl_memory_desc_init_by_strides(&mm.c, 2, cd, dnnl_f32, cs), "memory desc");
        dnnl_matmul_desc_t desc;
        check_dnnl(dnnl_matmul_desc_init(&desc, &mm.a, &mm.b, nullptr, &mm.c), "matmul desc");
        dnnl_primitive_attr_t attr = nullptr;
        dnnl_post_ops_t ops = nullptr;
        check_dnnl(dnnl_primitive_attr_create(&attr), "attr");
        if (p.accumulate) {
            check_dnnl(dnnl_post_ops_create(&ops), "post-ops");
            check_dnnl(dnnl_post_ops_append_sum(ops, 1.0f), "sum post-op");
            check_dnnl(dnnl_primitive_attr_set_post_ops(attr, ops), "post-ops");
        }
        dnnl_primitive_desc_t pd = nullptr;
        const dnnl_status_t st = dnnl_primitive_desc_create(&pd, &desc, attr, engine_, nullptr);
        if (ops) dnnl_post_ops_destroy(ops);
        dnnl_primitive_attr_destroy(attr);
        check_dnnl(st, "bf16 matmul descriptor");
        const char* impl = nullptr;
        if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
            mm.impl = impl;
        const dnnl_status_t cst = dnnl_primitive_create(&mm.prim, pd);
        dnnl_primitive_desc_destroy(pd);
        check_dnnl(cst, "bf16 matmul primitive");
        return mm;
    }

    dnnl_engine_t engine_ = nullptr;
    dnnl_stream_t stream_ = nullptr;
    std::mutex mu_;
    std::map<Problem, Matmul> cache_;
};

Bf16Engine& bf16_engine() {
    static Bf16Engine e;
    return e;
}

// Rounded operands: per calling thread, grown to the largest GEMM seen.
std::vector<uint16_t>& scratch(int which) {
    thread_local std::vector<uint16_t> buf[2];
    return buf[which];
}

}  // namespace
#endif

std::string gemm_bf16_emulation_reason() {
    const Bf16Selection& sel = bf16_selection();  // AMX, AVX512_BF16 or why neither (bf16_isa.h)
    if (sel.path == Bf16Path::kEmulated) return sel.why;
#if LLMT_HAVE_ONEDNN
    static const std::string load_error = [] {
        try {
            bf16_engine();
            return std::string();
        } catch (const std::exception& e) {
            return std::string(e.what());
        }
    }();
    return load_error;
#else
    return "this build has no oneDNN (libdnnl-dev)";
#endif
}

bool gemm_bf16_native() { return gemm_bf16_emulation_reason().empty(); }

std::string gemm_bf16_describe() {
#if LLMT_HAVE_ONEDNN
    if (gemm_bf16_native())
        return "oneDNN " + bf16_engine().get({false, false, 64, 64, 64, 64, false, omp_get_max_threads()}).impl +
               (bf16_selection().path == Bf16Path::kAmx ? " (AMX tiles)" : "");
#endif
    return "emulated in fp32 sgemm on bf16-rounded operands: " + gemm_bf16_emulation_reason();
}

namespace {

// bf16 numerics without bf16 instructions: the operands rounded to bf16 values kept in fp32, then sgemm.
void emulate_gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                       const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
    thread_local std::vector<float> ra, rb;
    auto round_copy = [](const float* src, int64_t rows, int64_t cols, int64_t ld, std::vector<float>& dst) {
        dst.resize(static_cast<size_t>(rows * cols));
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < cols; j++) dst[r * cols + j] = float_from_bf16(bf16_from_float(src[r * ld + j]));
    };
    round_copy(A, trans_a ? K : M, trans_a ? M : K, lda, ra);
    round_copy(B, trans_b ? N : K, trans_b ? K : N, ldb, rb);
    sgemm(trans_a, trans_b, M, N, K, 1.0f, ra.data(), trans_a ? M : K, rb.data(), trans_b ? K : N, beta, C, ldc);
}

}  // namespace

void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
    gemm_bf16_with(gemm_bf16_native(), trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc);
}

void gemm_bf16_with(bool native, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A,
                    int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
    LLMT_ASSERT(beta == 0.0f || beta == 1.0f);
    if (native)
        LLMT_CHECK_AS(DeviceError, gemm_bf16_native(), "native bf16 GEMM on the CPU is unavailable: {}",
                      gemm_bf16_emulation_reason());
    if (M == 0 || N == 0) return;
    if (K == 0) {
        if (beta == 0.0f)
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) C[i * ldc + j] = 0.0f;
        return;
    }
    const ScopedOmpThreads threads(threads_for_flops(2.0 * static_cast<double>(M) * N * K));
    if (!native) return emulate_gemm_bf16(trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc);
#if LLMT_HAVE_ONEDNN
    auto& a = scratch(0);
    auto& b = scratch(1);
    a.resize(static_cast<size_t>(M * K));
    b.resize(static_cast<size_t>(K * N));
    round_to_bf16(A, trans_a ? K : M, trans_a ? M : K, lda, a.data());
    round_to_bf16(B, trans_b ? N : K, trans_b ? K : N, ldb, b.data());
    auto& eng = bf16_engine();
    eng.run(eng.get({trans_a, trans_b, M, N, K, ldc, beta != 0.0f, omp_get_max_threads()}), a.data(), b.data(), C);
#endif
}

}  // namespace llmt::kernels::cpu
