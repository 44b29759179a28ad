// RMSNorm on CUDA (cuda/rmsnorm.h). Forward: one warp per row; rows whose width is a multiple of 16 bytes take the
// vectorised kernel (each lane holds its 16-byte groups of the row, lane, lane + 32, ..., in registers, so the row
// is read from memory once), other widths the scalar kernel, which re-reads the row (from L1). Backward: one row
// across a block, several rows per iteration, dweight's partial sums in registers per thread across the block's
// rows, written per block to a scratch buffer and added in block order by a second kernel (deterministic); rows
// wider than a block holds take a scalar kernel with atomics. Templated on the storage type (fp32 or bf16);
// statistics and arithmetic are fp32.
#include <cstdint>
#include <initializer_list>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/rmsnorm_backward_kernels.cuh"
#include "kernels/cuda/runtime.h"

namespace llmt::kernels::cuda {
namespace {

constexpr int kWarps = 8;                  // forward (and the wide-row backward): rows per block, a warp each
constexpr int kMaxVecsPerLane = 16;        // forward: bf16 C <= 4096, fp32 C <= 2048 in registers
constexpr long kMaxAtomicBwdBlocks = 264;  // the wide-row backward: ~2 blocks per SM of an H100 (132 SMs)

using rms::kVec;
using rms::unpack;

// kRes: the row is inp1 + inp2, stored (rounded to T) to residual_out and normalised from the stored values.
template <typename T, int kV, bool kRes>
__global__ void rmsnorm_forward_vec_kernel(T* out, float* rstd, T* residual_out, const T* inp, const T* inp2,
                                           const T* weight, float eps, long rows, int C) {
    constexpr int V = kVec<T>;
    const int lane = threadIdx.x % 32;
    const long row = blockIdx.x * static_cast<long>(kWarps) + threadIdx.x / 32;
    if (row >= rows) return;
    const int nvec = C / V;
    const uint4* xr = reinterpret_cast<const uint4*>(inp + row * C);
    uint4 raw[kV];
    float ss = 0.0f;
#pragma unroll
    for (int v = 0; v < kV; v++) {
        const int idx = v * 32 + lane;
        if (idx >= nvec) break;
        raw[v] = xr[idx];
        if constexpr (kRes) {
            const uint4 bb = reinterpret_cast<const uint4*>(inp2 + row * C)[idx];
            const T* ea = reinterpret_cast<const T*>(&raw[v]);
            const T* eb = reinterpret_cast<const T*>(&bb);
            uint4 h;
            T* eh = reinterpret_cast<T*>(&h);
#pragma unroll
            for (int q = 0; q < V; q++) eh[q] = cvt<T>(ldf(ea[q]) + ldf(eb[q]));
            reinterpret_cast<uint4*>(residual_out + row * C)[idx] = h;
            raw[v] = h;
        }
        float x[V];
        unpack<T>(x, raw[v]);
#pragma unroll
        for (int q = 0; q < V; q++) ss += x[q] * x[q];
    }
    const float r = 1.0f / sqrtf(warp_sum(ss) / C + eps);
    const uint4* wv = reinterpret_cast<const uint4*>(weight);
    uint4* orow = reinterpret_cast<uint4*>(out + row * C);
#pragma unroll
    for (int v = 0; v < kV; v++) {
        const int idx = v * 32 + lane;
        if (idx >= nvec) break;
        float x[V], w[V];
        unpack<T>(x, raw[v]);
        unpack<T>(w, wv[idx]);
        uint4 o;
        T* eo = reinterpret_cast<T*>(&o);
#pragma unroll
        for (int q = 0; q < V; q++) eo[q] = cvt<T>(x[q] * r * w[q]);
        orow[idx] = o;
    }
    if (lane == 0) rstd[row] = r;
}

// Any width and alignment: lane c of the row's elements c, c + 32, ...; the second pass re-reads the row.
template <typename T, bool kRes>
__global__ void rmsnorm_forward_kernel(T* out, float* rstd, T* residual_out, const T* inp, const T* inp2,
                                       const T* weight, float eps, long rows, int C) {
    const int lane = threadIdx.x % 32;
    const long row = blockIdx.x * static_cast<long>(kWarps) + threadIdx.x / 32;
    if (row >= rows) return;
    const T* x = inp + row * C;
    if constexpr (kRes) {  // this lane writes, then re-reads, only its own elements of residual_out
        T* h = residual_out + row * C;
        const T* y = inp2 + row * C;
        for (int c = lane; c < C; c += 32) h[c] = cvt<T>(ldf(x[c]) + ldf(y[c]));
        x = h;
    }
    float ss = 0.0f;
    for (int c = lane; c < C; c += 32) {
        const float v = ldf(x[c]);
        ss += v * v;
    }
    const float r = 1.0f / sqrtf(warp_sum(ss) / C + eps);
    T* o = out + row * C;
    for (int c = lane; c < C; c += 32) o[c] = cvt<T>(ldf(x[c]) * r * ldf(weight[c]));
    if (lane == 0) rstd[row] = r;
}

// Rows wider than rms::rmsnorm_backward_rows_kernel holds (more than kMaxBwdThreads * 4 groups): one warp per row,
// the row re-read from L1, dweight through shared then global atomics (its last bits vary between runs).
// Shared memory: C floats (the block's dweight partial).
template <typename T>
__global__ void rmsnorm_backward_kernel(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight,
                                        const float* rstd, long rows, int C) {
    extern __shared__ float sdw[];
    for (int c = threadIdx.x; c < C; c += blockDim.x) sdw[c] = 0.0f;
    __syncthreads();
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (long row = blockIdx.x * static_cast<long>(kWarps) + warp; row < rows;
         row += static_cast<long>(gridDim.x) * kWarps) {
        const T* x = inp + row * C;
        const T* g = dout + row * C;
        const float r = rstd[row];
        float a = 0.0f;
        for (int c = lane; c < C; c += 32) a += ldf(weight[c]) * ldf(g[c]) * ldf(x[c]) * r;
        a = warp_sum(a) / C;
        T* di = dinp + row * C;
        for (int c = lane; c < C; c += 32) {
            const float n = ldf(x[c]) * r, gc = ldf(g[c]);
            atomicAdd(&sdw[c], n * gc);
            di[c] = cvt<T>(ldf(di[c]) + (ldf(weight[c]) * gc - n * a) * r);
        }
    }
    __syncthreads();
    for (int c = threadIdx.x; c < C; c += blockDim.x) atomicAdd(&dweight[c], sdw[c]);
}

inline bool aligned16(const void* p) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Vectors per lane of the register-resident kernels for width C (0: take the scalar kernels).
template <typename T>
int vecs_per_lane(int C, std::initializer_list<const void*> ptrs) {
    if (C % kVec<T> != 0) return 0;
    for (const void* p : ptrs)
        if (!aligned16(p)) return 0;
    const int per_lane = (C / kVec<T> + 31) / 32;
    for (int k = 1; k <= kMaxVecsPerLane; k *= 2)
        if (per_lane <= k) return k;
    return 0;
}

template <typename T, bool kRes>
void forward_t(T* out, float* rstd, T* residual_out, const T* inp, const T* inp2, const T* weight, float eps, int B,
               int T_, int C, cudaStream_t stream) {
    const long rows = static_cast<long>(B) * T_;
    const unsigned grid = static_cast<unsigned>((rows + kWarps - 1) / kWarps);
    switch (vecs_per_lane<T>(C, {out, residual_out, inp, inp2, weight})) {
#define LLMT_RMS_FWD(K)                                                                                              \
    case K:                                                                                                          \
        rmsnorm_forward_vec_kernel<T, K, kRes>                                                                       \
            <<<grid, kWarps * 32, 0, stream>>>(out, rstd, residual_out, inp, inp2, weight, eps, rows, C);            \
        LLMT_CUDA_CHECK_LAUNCH("rmsnorm_forward_vec_kernel");                                                        \
        return;
        LLMT_RMS_FWD(1)
        LLMT_RMS_FWD(2)
        LLMT_RMS_FWD(4)
        LLMT_RMS_FWD(8)
        LLMT_RMS_FWD(16)
#undef LLMT_RMS_FWD
        default: break;
    }
    rmsnorm_forward_kernel<T, kRes><<<grid, kWarps * 32, 0, stream>>>(out, rstd, residual_out, inp, inp2, weight, eps,
                                                                      rows, C);
    LLMT_CUDA_CHECK_LAUNCH("rmsnorm_forward_kernel");
}

template <typename T>
void backward_atomic(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight, const float* rstd,
                     long rows, int C, cudaStream_t stream) {
    long grid = (rows + kWarps - 1) / kWarps;
    if (grid > kMaxAtomicBwdBlocks) grid = kMaxAtomicBwdBlocks;  // enough rows per block to amortise the C atomics
    const size_t smem = sizeof(float) * static_cast<size_t>(C);
    if (smem > 48 * 1024)
        LLMT_CUDA_CHECK(cudaFuncSetAttribute(rmsnorm_backward_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(smem)));
    rmsnorm_backward_kernel<T>
        <<<static_cast<unsigned>(grid), kWarps * 32, smem, stream>>>(dinp, dweight, dout, inp, weight, rstd, rows, C);
    LLMT_CUDA_CHECK_LAUNCH("rmsnorm_backward_kernel");
}

// kR = kBwdGroupsInFlight / kG rows per step: 4 at Llama-3.2-1B's width (one 16-byte group per thread).
template <typename T, int kE, int kG>
void backward_rows(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight, const float* rstd, long rows,
                   int C, int threads, cudaStream_t stream) {
    rms::backward_rows<T, kE, kG, rms::kBwdGroupsInFlight / kG>(dinp, dweight, dout, inp, weight, rstd, rows, C,
                                                                threads, stream);
}

// Groups of 16 bytes where the width and the pointers allow, else of one element; the fewest groups per thread
// (1, 2 or 4) that fit the row in kMaxBwdThreads threads, and threads for them in whole warps.
template <typename T>
void backward_t(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight, const float* rstd, int B,
                int T_, int C, cudaStream_t stream) {
    const long rows = static_cast<long>(B) * T_;
    if (rows <= 0 || C <= 0) return;
    const bool vec = C % kVec<T> == 0 && aligned16(dinp) && aligned16(dout) && aligned16(inp) && aligned16(weight);
    const int ngroups = vec ? C / kVec<T> : C;
    int per_thread = 1;
    while (per_thread <= 4 && (ngroups + per_thread - 1) / per_thread > rms::kMaxBwdThreads) per_thread *= 2;
    const int threads = ((ngroups + per_thread - 1) / per_thread + 31) / 32 * 32;
    constexpr int V = kVec<T>;
    switch (per_thread * (vec ? 1 : -1)) {
        case 1: return backward_rows<T, V, 1>(dinp, dweight, dout, inp, weight, rstd, rows, C, threads, stream);
        case 2: return backward_rows<T, V, 2>(dinp, dweight, dout, inp, weight, rstd, rows, C, threads, stream);
        case 4: return backward_rows<T, V, 4>(dinp, dweight, dout, inp, weight, rstd, rows, C, threads, stream);
        case -1: return backward_rows<T, 1, 1>(dinp, dweight, dout, inp, weight, rstd, rows, C, threads, stream);
        case -2: return backward_rows<T, 1, 2>(dinp, dweight, dout, inp, weight, rstd, rows, C, threads, stream);
        case -4: return backward_rows<T, 1, 4>(dinp, dweight, dout, inp, weight, rstd, rows, C, threads, stream);
        default: return backward_atomic(dinp, dweight, dout, inp, weight, rstd, rows, C, stream);
    }
}

}  // namespace

#define LLMT_RMSNORM_FOR(T)                                                                                          \
    void rmsnorm_forward(T* out, float* rstd, const T* inp, const T* weight, float eps, int B, int T_, int C,        \
                         cudaStream_t stream) {                                                                      \
        forward_t<T, false>(out, rstd, nullptr, inp, nullptr, weight, eps, B, T_, C, stream);                        \
    }                                                                                                                \
    void rmsnorm_backward(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight, const float* rstd,   \
                          int B, int T_, int C, cudaStream_t stream) {                                               \
        backward_t(dinp, dweight, dout, inp, weight, rstd, B, T_, C, stream);                                        \
    }                                                                                                                \
    void residual_rmsnorm_forward(T* residual_out, T* out, float* rstd, const T* inp1, const T* inp2,                \
                                  const T* weight, float eps, int B, int T_, int C, cudaStream_t stream) {           \
        forward_t<T, true>(out, rstd, residual_out, inp1, inp2, weight, eps, B, T_, C, stream);                      \
    }
LLMT_RMSNORM_FOR(float)
LLMT_RMSNORM_FOR(bf16)
#undef LLMT_RMSNORM_FOR

}  // namespace llmt::kernels::cuda
