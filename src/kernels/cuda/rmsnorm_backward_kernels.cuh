// The RMSNorm backward's row kernels (cuda/rmsnorm.cu includes this; so does the kernel lab, bench/kernels/
// rmsnorm_lab.cu, which runs them at other rows per step to re-measure src's choice). Device code and host
// launchers for .cu files only (with the 16-byte group helpers the forward uses too), in an unnamed namespace
// inside rms:: (each including file gets its own copy, and its own scratch buffer).
// With n = x rstd and dn = dout w: dinp += rstd (dn - n mean(dn n)) and dweight += dout n, fp32 arithmetic.
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/partial_scratch.cuh"
#include "kernels/cuda/runtime.h"

namespace llmt::kernels::cuda::rms {
namespace {

constexpr int kMaxBwdThreads = 512;    // threads of a backward block, which spans one row
constexpr int kBwdGroupsInFlight = 4;  // src's groups per thread and tensor one iteration loads (kG * kR)
constexpr int kSumThreads = 1024;      // dweight_sum_kernel: 32 warps per 32 columns

template <typename T>
constexpr int kVec = 16 / static_cast<int>(sizeof(T));  // elements per 16-byte load

// kE elements of T moved by one load or store: 16 bytes (kE = kVec<T>) or one element (kE = 1).
template <typename T, int kE>
using Raw = std::conditional_t<kE * sizeof(T) == 16, uint4, std::conditional_t<sizeof(T) == 4, uint32_t, uint16_t>>;

template <typename T, int kE = kVec<T>>
__device__ __forceinline__ void unpack(float (&f)[kE], const Raw<T, kE>& raw) {
    static_assert(kE == 1 || kE == kVec<T>, "a group is 16 bytes or one element");
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int q = 0; q < kE; q++) f[q] = ldf(e[q]);
}

// One row across the block: thread t holds the row's groups t, t + blockDim.x, ... (kG of them; a group is kE
// elements, one access) of kR rows at a time, and dweight's partial sums for its columns in registers across all
// the block's rows. An iteration issues every load of its kR rows (x, dout and dinp) first; each row's
// sum(w dout x) goes warp shuffle -> one shared slot per warp -> every thread adds the slots in warp order (the
// slots are double-buffered, so one barrier per iteration orders their writes and reads). Blocks take steps
// (kR rows each) blockIdx.x, blockIdx.x + gridDim.x, ...; rows past `rows` in the last step read as zeros and are
// not written. At the end the block writes its dweight partial to partial[blockIdx.x] (C floats), which
// dweight_sum_kernel adds up. Needs blockDim.x * kG >= C / kE, blockDim.x a multiple of 32 and <= kMaxBwdThreads.
template <typename T, int kE, int kG, int kR>
__global__ void __launch_bounds__(kMaxBwdThreads)
    rmsnorm_backward_rows_kernel(T* dinp, float* partial, const T* dout, const T* inp, const T* weight,
                                 const float* rstd, long rows, int C) {
    using R = Raw<T, kE>;
    __shared__ float row_sums[2][kR][kMaxBwdThreads / 32];  // [buffer][row of the step][warp]
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    const int ngroups = C / kE;
    const R* xg = reinterpret_cast<const R*>(inp);
    const R* gg = reinterpret_cast<const R*>(dout);
    R* dg = reinterpret_cast<R*>(dinp);
    int col[kG];  // this thread's groups of a row (>= ngroups: none)
    R w[kG];
    float dw[kG][kE];
#pragma unroll
    for (int g = 0; g < kG; g++) {
        col[g] = threadIdx.x + g * blockDim.x;
        w[g] = col[g] < ngroups ? reinterpret_cast<const R*>(weight)[col[g]] : R{};
#pragma unroll
        for (int q = 0; q < kE; q++) dw[g][q] = 0.0f;
    }
    const long steps = (rows + kR - 1) / kR;
    int buf = 0;
    for (long step = blockIdx.x; step < steps; step += gridDim.x, buf ^= 1) {
        R xs[kR][kG], gs[kR][kG], ds[kR][kG];
        float r[kR];
#pragma unroll
        for (int i = 0; i < kR; i++) {
            const long row = step * kR + i;
            const bool live = row < rows;
            r[i] = live ? rstd[row] : 0.0f;
#pragma unroll
            for (int g = 0; g < kG; g++) {
                const bool on = live && col[g] < ngroups;
                const long at = row * ngroups + col[g];
                xs[i][g] = on ? xg[at] : R{};
                gs[i][g] = on ? gg[at] : R{};
                ds[i][g] = on ? dg[at] : R{};
            }
        }
#pragma unroll
        for (int i = 0; i < kR; i++) {
            float a = 0.0f;  // sum over this thread's columns of w dout x
#pragma unroll
            for (int g = 0; g < kG; g++) {
                float x[kE], dy[kE], wf[kE];
                unpack<T, kE>(x, xs[i][g]);
                unpack<T, kE>(dy, gs[i][g]);
                unpack<T, kE>(wf, w[g]);
#pragma unroll
                for (int q = 0; q < kE; q++) a += wf[q] * dy[q] * x[q];
            }
            a = warp_sum(a);
            if (lane == 0) row_sums[buf][i][warp] = a;
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < kR; i++) {
            float a = 0.0f;
            for (int k = 0; k < nwarps; k++) a += row_sums[buf][i][k];
            const float m = a * r[i] / C;  // mean(dn n)
            const long row = step * kR + i;
#pragma unroll
            for (int g = 0; g < kG; g++) {
                float x[kE], dy[kE], wf[kE], d[kE];
                unpack<T, kE>(x, xs[i][g]);
                unpack<T, kE>(dy, gs[i][g]);
                unpack<T, kE>(wf, w[g]);
                unpack<T, kE>(d, ds[i][g]);
                R o;
                T* eo = reinterpret_cast<T*>(&o);
#pragma unroll
                for (int q = 0; q < kE; q++) {
                    const float n = x[q] * r[i];
                    eo[q] = cvt<T>(d[q] + (wf[q] * dy[q] - n * m) * r[i]);
                    dw[g][q] += n * dy[q];
                }
                if (row < rows && col[g] < ngroups) dg[row * ngroups + col[g]] = o;
            }
        }
    }
    float* part = partial + blockIdx.x * static_cast<long>(C);
#pragma unroll
    for (int g = 0; g < kG; g++) {
        if (col[g] >= ngroups) continue;
        float* p = part + static_cast<long>(col[g]) * kE;  // 16-byte aligned when kE is 4 or 8 (C % kE == 0)
        if constexpr (kE % 4 == 0) {
#pragma unroll
            for (int q = 0; q < kE; q += 4)
                reinterpret_cast<float4*>(p)[q / 4] = make_float4(dw[g][q], dw[g][q + 1], dw[g][q + 2], dw[g][q + 3]);
        } else {
#pragma unroll
            for (int q = 0; q < kE; q++) p[q] = dw[g][q];
        }
    }
}

// dweight[c] += sum over blocks b of partial[b][c], added in block order (the same bits on every run): a block
// per 32 columns, its warp k adding rows k, k + 32, ... of its columns, then warp 0 adding the 32 warps' sums.
__global__ void __launch_bounds__(kSumThreads)
    dweight_sum_kernel(float* dweight, const float* partial, int nparts, int C) {
    __shared__ float sums[kSumThreads / 32][32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int c = blockIdx.x * 32 + lane;
    float s = 0.0f;
    if (c < C) {
#pragma unroll 4
        for (int b = warp; b < nparts; b += kSumThreads / 32) s += partial[static_cast<long>(b) * C + c];
    }
    sums[warp][lane] = s;
    __syncthreads();
    if (warp == 0 && c < C) {
        float t = 0.0f;
        for (int k = 0; k < kSumThreads / 32; k++) t += sums[k][lane];
        dweight[c] += t;
    }
}

// Blocks for rmsnorm_backward_rows_kernel<T, kE, kG, kR> over `rows`: as many as fit on the device at once
// (at most max_per_sm per SM where that is > 0; fewer where there are fewer steps), each taking the same number
// of steps give or take one.
template <typename T, int kE, int kG, int kR>
long rows_grid(long rows, int threads, int max_per_sm = 0) {
    static std::atomic<int> resident[kMaxBwdThreads / 32 + 1];  // blocks per SM by warps per block; 0: not asked
    int per_sm = resident[threads / 32].load(std::memory_order_relaxed);
    if (per_sm == 0) {
        const auto kernel = rmsnorm_backward_rows_kernel<T, kE, kG, kR>;
        LLMT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
        if (per_sm < 1) per_sm = 1;
        resident[threads / 32].store(per_sm, std::memory_order_relaxed);
    }
    if (max_per_sm > 0 && per_sm > max_per_sm) per_sm = max_per_sm;
    const long steps = (rows + kR - 1) / kR;
    const long most = static_cast<long>(partial_scratch().sms) * per_sm;
    const long per_block = (steps + most - 1) / most;
    return (steps + per_block - 1) / per_block;  // <= most; grid x per_block steps cover every row
}

// The backward of `rows` rows of width C in groups of kE elements, kG per thread of `threads` (a multiple of 32,
// <= kMaxBwdThreads, threads * kG >= C / kE), kR rows per step: rmsnorm_backward_rows_kernel, then
// dweight_sum_kernel over the blocks' partials.
template <typename T, int kE, int kG, int kR>
void backward_rows(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight, const float* rstd, long rows,
                   int C, int threads, cudaStream_t stream, int max_per_sm = 0) {
    const long grid = rows_grid<T, kE, kG, kR>(rows, threads, max_per_sm);
    float* partial = partial_buffer(partial_scratch(), static_cast<size_t>(grid) * static_cast<size_t>(C));
    rmsnorm_backward_rows_kernel<T, kE, kG, kR>
        <<<static_cast<unsigned>(grid), threads, 0, stream>>>(dinp, partial, dout, inp, weight, rstd, rows, C);
    LLMT_CUDA_CHECK_LAUNCH("rmsnorm_backward_rows_kernel");
    dweight_sum_kernel<<<static_cast<unsigned>((C + 31) / 32), kSumThreads, 0, stream>>>(dweight, partial,
                                                                                         static_cast<int>(grid), C);
    LLMT_CUDA_CHECK_LAUNCH("dweight_sum_kernel");
}

}  // namespace
}  // namespace llmt::kernels::cuda::rms
