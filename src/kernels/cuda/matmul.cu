// Linear layer on CUDA (cuda/matmul.h). cuBLASLt is column-major: a row-major (R, K) matrix is a
// column-major (K, R) one, so each product below is written for the transposed outputs.
// Descriptors, layouts and the algorithm are built once per distinct problem (shape, types, epilogue) and
// cached; only the bias/aux pointers are set per call. The workspace is allocated once. The algorithm is
// the fastest of the heuristic's top candidates, timed once at the problem's first call (~1% off a GPT-2
// step on an H100; the DGELU GEMM stays near 400 TFLOP/s: every candidate for that epilogue there is an
// older xmma kernel). dbias is a column-sum kernel: cuBLASLt's BGRADB epilogue was measured slower on an
// H100 (it runs its own reduction kernel after the GEMM; docs/benchmarks.md). Knobs (core/knobs.h):
// LLMTRAIN_CUBLASLT_TUNE=0 takes the heuristic's first pick (the same algorithm on every run),
// LLMTRAIN_CUDA_TF32=1 runs fp32 GEMMs on TF32 tensor cores.
#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "core/knobs.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/runtime.h"

namespace llmt::kernels::cuda {
namespace {

enum class Epi { kNone, kBias, kGeluAuxBias, kDGelu };

struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
    cublasLtMatmulAlgo_t algo{};
    std::vector<cublasLtMatmulAlgo_t> candidates;  // the heuristic's picks, best first; cleared once tuned
};

constexpr int kCandidates = 32;  // the heuristic's top picks timed per problem (docs/benchmarks.md)

using PlanKey = std::tuple<int, int, int, bool, bool, int, int, int, int, int, int, bool, bool>;

template <typename T>
constexpr cudaDataType_t data_type();
template <>
constexpr cudaDataType_t data_type<float>() { return CUDA_R_32F; }
template <>
constexpr cudaDataType_t data_type<bf16>() { return CUDA_R_16BF; }

// Plans live for the process (a few dozen distinct shapes per model); built under a mutex.
const Plan& plan_for(int m, int n, int k, bool ta, bool tb, int lda, int ldb, int ldd, cudaDataType_t ab,
                     cudaDataType_t cd, Epi epi, bool tf32_call) {
    static std::mutex mu;
    static std::map<PlanKey, Plan>* plans = new std::map<PlanKey, Plan>;
    // LLMTRAIN_CUDA_TF32=1 trades fp32 exactness (~3e-4 relative) for the tensor cores' TF32 rate. Both
    // knobs are part of the key, so a test that switches them gets a plan built for the new value.
    // tf32_call: the caller asks for TF32 (the classifier's convolutions, trainer.conv_tf32).
    // GEMMs of more than kMaxTunedFlops are not timed: 32 candidates x 11 runs each would cost seconds per
    // shape at a run's first step (minutes over a step's shapes at T = 128k on an 8B model); they take the
    // heuristic's first pick. (What timing would gain at these sizes has not been measured.)
    constexpr double kMaxTunedFlops = 4398046511104.0;  // 2^42: 4.4 ms at an H100/H200's 989 TFLOP/s
    const bool tf32 = tf32_call || knob_on(Knob::kCudaTf32),
               tune = knob_on(Knob::kCublasLtTune) && 2.0 * m * n * static_cast<double>(k) <= kMaxTunedFlops;
    std::lock_guard<std::mutex> lock(mu);
    const PlanKey key{m, n, k, ta, tb, lda, ldb, ldd, static_cast<int>(ab), static_cast<int>(cd),
                      static_cast<int>(epi), tf32, tune};
    auto it = plans->find(key);
    if (it != plans->end()) return it->second;

    Plan p;
    const cublasComputeType_t compute =
        ab == CUDA_R_32F && tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;  // bf16: fp32 accumulation
    LLMT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, compute, CUDA_R_32F));
    const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    LLMT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)));
    LLMT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)));
    cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_DEFAULT;
    if (epi == Epi::kBias) e = CUBLASLT_EPILOGUE_BIAS;
    if (epi == Epi::kGeluAuxBias) e = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    if (epi == Epi::kDGelu) e = CUBLASLT_EPILOGUE_DGELU;
    LLMT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e)));
    if (epi == Epi::kGeluAuxBias || epi == Epi::kDGelu) {
        const int64_t aux_ld = ldd;  // the aux matrix has D's shape and leading dimension
        LLMT_CUBLAS_CHECK(
            cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld)));
    }
    LLMT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.la, ab, ta ? k : m, ta ? m : k, lda));
    LLMT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.lb, ab, tb ? n : k, tb ? k : n, ldb));
    LLMT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.ld, cd, m, n, ldd));
    cublasLtMatmulPreference_t pref = nullptr;
    LLMT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const size_t ws = cublaslt_workspace_size();
    cublasLtMatmulHeuristicResult_t heur[kCandidates]{};
    int found = 0;
    const cublasStatus_t st1 =
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    const cublasStatus_t st2 = st1 == CUBLAS_STATUS_SUCCESS
                                   ? cublasLtMatmulAlgoGetHeuristic(cublaslt(), p.desc, p.la, p.lb, p.ld, p.ld, pref,
                                                                    tune ? kCandidates : 1, heur, &found)
                                   : st1;
    cublasLtMatmulPreferenceDestroy(pref);
    LLMT_CUBLAS_CHECK(st2);
    for (int i = 0; i < found; i++)
        if (heur[i].state == CUBLAS_STATUS_SUCCESS) p.candidates.push_back(heur[i].algo);
    if (p.candidates.empty()) LLMT_CUBLAS_CHECK(CUBLAS_STATUS_NOT_SUPPORTED);  // none for this shape/epilogue
    p.algo = p.candidates.front();
    if (p.candidates.size() == 1) p.candidates.clear();
    return plans->emplace(key, p).first->second;
}

// Times each candidate algorithm on this call's operands (a warm-up run, then kReps runs between two
// events; two rounds) and keeps the fastest; runs once per plan, at its first call. Accumulating calls (beta != 0 with
// C = D) must not see the trial runs: those write a scratch D. With C != D the trials rewrite D from the
// same inputs, so D ends as the call leaves it. Skipped while the stream is being captured into a graph
// (timing needs a host wait).
void tune_plan(Plan& p, const void* A, const void* Bm, const void* Cm, void* D, size_t d_bytes, float beta,
               cudaStream_t stream) {
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    LLMT_CUDA_CHECK(cudaStreamIsCapturing(stream, &cap));
    if (cap != cudaStreamCaptureStatusNone) return;
    constexpr int kReps = 5;
    void* out = D;
    if (beta != 0.0f && Cm == D) {
        LLMT_CUDA_CHECK(cudaMallocAsync(&out, d_bytes, stream));
        LLMT_CUDA_CHECK(cudaMemsetAsync(out, 0, d_bytes, stream));
    }
    cudaEvent_t e0, e1;
    LLMT_CUDA_CHECK(cudaEventCreate(&e0));
    LLMT_CUDA_CHECK(cudaEventCreate(&e1));
    const float alpha = 1.0f;
    // Two rounds over the candidates, each keeping its faster round: one round's timings were noisy enough
    // (a run's first GEMMs, the GPU perhaps still raising its clocks) to keep, on an H100, a 91 us kernel
    // for the classifier's 512x3136 @ 3136x128 layer over a 28 us one (Nsight Compute); with two rounds the
    // 28 us one was kept in the four runs since.
    std::vector<float> ms(p.candidates.size(), 1e30f);
    for (int round = 0; round < 2; ++round)
        for (size_t i = 0; i < p.candidates.size(); ++i) {
            const cublasLtMatmulAlgo_t& algo = p.candidates[i];
            auto run = [&] {
                return cublasLtMatmul(cublaslt(), p.desc, &alpha, A, p.la, Bm, p.lb, &beta, Cm == D ? out : Cm, p.ld,
                                      out, p.ld, &algo, cublaslt_workspace(), cublaslt_workspace_size(), stream);
            };
            if (run() != CUBLAS_STATUS_SUCCESS) continue;  // a candidate the library then refuses: skip it
            LLMT_CUDA_CHECK(cudaEventRecord(e0, stream));
            bool ok = true;
            for (int r = 0; r < kReps && ok; r++) ok = run() == CUBLAS_STATUS_SUCCESS;
            LLMT_CUDA_CHECK(cudaEventRecord(e1, stream));
            LLMT_CUDA_CHECK(cudaEventSynchronize(e1));
            float t = 0.0f;
            LLMT_CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
            if (ok) ms[i] = std::min(ms[i], t);
        }
    const size_t best = static_cast<size_t>(std::min_element(ms.begin(), ms.end()) - ms.begin());
    if (ms[best] < 1e30f) p.algo = p.candidates[best];
    LLMT_CUDA_CHECK(cudaEventDestroy(e0));
    LLMT_CUDA_CHECK(cudaEventDestroy(e1));
    if (out != D) LLMT_CUDA_CHECK(cudaFreeAsync(out, stream));
    LLMT_CUDA_CHECK(cudaGetLastError());
    p.candidates.clear();
}

// D (m, n; column-major, ldd) = alpha op(A) op(B) + beta C [epilogue: + bias (m) broadcast over columns;
// GELU with the pre-activation to aux; or times GELU'(aux)]. op(A) is (m, k): A is stored (m, k)
// col-major when !ta, (k, m) when ta; likewise op(B) is (k, n). C is D unless Cm is given (same layout as
// D, distinct memory: the residual stream added in the GEMM's epilogue).
template <typename AB, typename CD>
void lt_matmul(CD* D, const AB* A, const AB* Bm, const AB* bias, void* aux, Epi epi, int m, int n, int k, bool ta,
               bool tb, int lda, int ldb, int ldd, float beta, cudaStream_t stream, const CD* Cm = nullptr,
               float alpha = 1.0f, bool tf32 = false) {
    if (!Cm) Cm = D;
    if (epi == Epi::kNone && bias) epi = Epi::kBias;
    Plan& p = const_cast<Plan&>(plan_for(m, n, k, ta, tb, lda, ldb, ldd, data_type<AB>(), data_type<CD>(), epi, tf32));
    if (bias)
        LLMT_CUBLAS_CHECK(
            cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    if (aux)
        LLMT_CUBLAS_CHECK(
            cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
    if (!p.candidates.empty())
        tune_plan(p, A, Bm, Cm, D, static_cast<size_t>(ldd) * n * sizeof(CD), beta, stream);
    LLMT_CUBLAS_CHECK(cublasLtMatmul(cublaslt(), p.desc, &alpha, A, p.la, Bm, p.lb, &beta, Cm, p.ld, D, p.ld, &p.algo,
                                     cublaslt_workspace(), cublaslt_workspace_size(), stream));
}

// dbias (OC) += sum over rows of dout (rows, OC). Block: 32 columns x 8 row lanes; grid.y splits rows.
template <typename T>
__global__ void bias_grad_kernel(float* dbias, const T* dout, int rows, int OC, int rows_per_block) {
    __shared__ float part[8][33];
    const int col = blockIdx.x * 32 + threadIdx.x;
    const int r0 = blockIdx.y * rows_per_block;
    const int r1 = min(rows, r0 + rows_per_block);
    float s = 0.0f;
    if (col < OC)
        for (int r = r0 + threadIdx.y; r < r1; r += 8) s += ldf(dout[static_cast<long>(r) * OC + col]);
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && col < OC) {
        float t = 0.0f;
        for (int i = 0; i < 8; i++) t += part[i][threadIdx.x];
        atomicAdd(&dbias[col], t);
    }
}

// bf16 with OC % 8 == 0: each thread sums 8 adjacent columns from 16-byte loads (a warp reads 512
// contiguous bytes of a row); 8 row lanes per block combine in shared memory. A block covers 8 * kRows
// rows; a full block issues a thread's kRows loads before summing them (more bytes in flight per thread
// than a one-row-at-a-time loop, which waits for each load; measured on an H100, docs/benchmarks.md).
template <int kRows>
__global__ void bias_grad_bf16x8_kernel(float* dbias, const bf16* dout, int rows, int OC) {
    __shared__ float part[8][32 * 8 + 1];
    const int col8 = blockIdx.x * 32 + threadIdx.x;  // 8-column group
    const int r0 = blockIdx.y * 8 * kRows;
    const int r1 = min(rows, r0 + 8 * kRows);
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (col8 * 8 < OC) {
        const uint4* base = reinterpret_cast<const uint4*>(dout) + col8;
        const long stride8 = OC / 8;  // one row in uint4 units
        if (r1 - r0 == 8 * kRows) {
            uint4 raw[kRows];
#pragma unroll
            for (int i = 0; i < kRows; i++) raw[i] = base[static_cast<long>(r0 + threadIdx.y + 8 * i) * stride8];
#pragma unroll
            for (int i = 0; i < kRows; i++) {
                const bf16* e = reinterpret_cast<const bf16*>(&raw[i]);
#pragma unroll
                for (int k = 0; k < 8; k++) s[k] += ldf(e[k]);
            }
        } else {
            for (int r = r0 + threadIdx.y; r < r1; r += 8) {
                const uint4 raw = base[static_cast<long>(r) * stride8];
                const bf16* e = reinterpret_cast<const bf16*>(&raw);
#pragma unroll
                for (int k = 0; k < 8; k++) s[k] += ldf(e[k]);
            }
        }
    }
#pragma unroll
    for (int k = 0; k < 8; k++) part[threadIdx.y][threadIdx.x * 8 + k] = s[k];
    __syncthreads();
    // 256 threads, 256 columns of this block: one column each.
    const int t = threadIdx.y * 32 + threadIdx.x;
    const int col = blockIdx.x * 256 + t;
    if (col < OC) {
        float v = 0.0f;
        for (int i = 0; i < 8; i++) v += part[i][t];
        atomicAdd(&dbias[col], v);
    }
}

void launch_bias_grad_bf16x8(float* dbias, const bf16* dout, int BT, int OC, cudaStream_t stream) {
    constexpr int kRows = 4;  // 32 rows per block: enough blocks to fill the GPU even for OC = 768
    const dim3 grid(static_cast<unsigned>((OC + 255) / 256),
                    static_cast<unsigned>((BT + 8 * kRows - 1) / (8 * kRows)));
    bias_grad_bf16x8_kernel<kRows><<<grid, dim3(32, 8), 0, stream>>>(dbias, dout, BT, OC);
    LLMT_CUDA_CHECK_LAUNCH("bias_grad_bf16x8_kernel");
}

}  // namespace

template <typename T>
void add_column_sums(float* dbias, const T* dout, int BT, int OC, cudaStream_t stream) {
    constexpr int kRowsPerBlock = 256;
    if constexpr (sizeof(T) == 2) {
        if (OC % 8 == 0) {
            launch_bias_grad_bf16x8(dbias, dout, BT, OC, stream);
            return;
        }
    }
    const dim3 grid(static_cast<unsigned>((OC + 31) / 32),
                    static_cast<unsigned>((BT + kRowsPerBlock - 1) / kRowsPerBlock));
    bias_grad_kernel<<<grid, dim3(32, 8), 0, stream>>>(dbias, dout, BT, OC, kRowsPerBlock);
    LLMT_CUDA_CHECK_LAUNCH("bias_grad_kernel");
}
template void add_column_sums<float>(float*, const float*, int, int, cudaStream_t);
template void add_column_sums<bf16>(float*, const bf16*, int, int, cudaStream_t);

namespace {

template <typename T>
void backward_t(T* dinp, const T* gelu_pre, float* dweight, float* dbias, const T* dout, const T* inp,
                const T* weight, int BT, int C, int OC, cudaStream_t stream) {
    // dinp^T (C, BT) = W (col-major (C, OC)) * dout^T (col-major (OC, BT)) [times GELU'(gelu_pre)].
    if (dinp)
        lt_matmul<T, T>(dinp, weight, dout, nullptr, const_cast<T*>(gelu_pre), gelu_pre ? Epi::kDGelu : Epi::kNone, C,
                        BT, OC, false, false, C, OC, C, 0.0f, stream);
    // dW^T (C, OC) += inp^T (col-major (C, BT)) * dout (col-major (OC, BT), transposed); fp32 accumulator.
    // (null: skipped, for callers that computed the weight gradient separately).
    if (dweight)
        lt_matmul<T, float>(dweight, inp, dout, nullptr, nullptr, Epi::kNone, C, OC, BT, false, true, C, OC, C, 1.0f,
                            stream);
    if (dbias) add_column_sums(dbias, dout, BT, OC, stream);
}

}  // namespace

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int BT, int C, int OC,
                    cudaStream_t stream, const float* residual, bool tf32) {
    // out^T (OC, BT) = W (col-major (C, OC), transposed) * inp^T (col-major (C, BT)) [+ residual^T].
    lt_matmul<float, float>(out, weight, inp, bias, nullptr, Epi::kNone, OC, BT, C, true, false, C, C, OC,
                            residual ? 1.0f : 0.0f, stream, residual, 1.0f, tf32);
}

void matmul_forward(bf16* out, const bf16* inp, const bf16* weight, const bf16* bias, int BT, int C, int OC,
                    cudaStream_t stream, const bf16* residual) {
    lt_matmul<bf16, bf16>(out, weight, inp, bias, nullptr, Epi::kNone, OC, BT, C, true, false, C, C, OC,
                          residual ? 1.0f : 0.0f, stream, residual);
}

void matmul_forward_gelu(bf16* out, bf16* pre_gelu, const bf16* inp, const bf16* weight, const bf16* bias, int BT,
                         int C, int OC, cudaStream_t stream) {
    lt_matmul<bf16, bf16>(out, weight, inp, bias, pre_gelu, Epi::kGeluAuxBias, OC, BT, C, true, false, C, C, OC,
                          0.0f, stream);
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int BT, int C, int OC, cudaStream_t stream) {
    backward_t<float>(dinp, nullptr, dweight, dbias, dout, inp, weight, BT, C, OC, stream);
}

void matmul_backward(bf16* dinp, const bf16* gelu_pre, float* dweight, float* dbias, const bf16* dout,
                     const bf16* inp, const bf16* weight, int BT, int C, int OC, cudaStream_t stream) {
    backward_t<bf16>(dinp, gelu_pre, dweight, dbias, dout, inp, weight, BT, C, OC, stream);
}

template <typename AB, typename CD>
void gemm(bool ta, bool tb, int M, int N, int K, float alpha, const AB* A, int lda, const AB* B, int ldb, float beta,
          CD* C, int ldc, cudaStream_t stream, bool tf32) {
    // Row-major C (M, N) is column-major C^T (N, M) = op(B)^T op(A)^T: B (row-major (K, N), or (N, K) when tb)
    // is the first column-major operand, transposed exactly when tb; A the second, transposed when ta.
    lt_matmul<AB, CD>(C, B, A, nullptr, nullptr, Epi::kNone, N, M, K, tb, ta, ldb, lda, ldc, beta, stream, nullptr,
                      alpha, tf32);
}

template void gemm<float, float>(bool, bool, int, int, int, float, const float*, int, const float*, int, float, float*,
                                 int, cudaStream_t, bool);
template void gemm<bf16, bf16>(bool, bool, int, int, int, float, const bf16*, int, const bf16*, int, float, bf16*, int,
                               cudaStream_t, bool);
template void gemm<bf16, float>(bool, bool, int, int, int, float, const bf16*, int, const bf16*, int, float, float*,
                                int, cudaStream_t, bool);

}  // namespace llmt::kernels::cuda
