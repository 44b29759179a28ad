// Kernel lab: the RMSNorm backward's variants (rmsnorm_lab.h). Version 1 is src/kernels/cuda/rmsnorm.cu's
// vectorised backward kernel and launcher at 748e3fc, unchanged apart from the names; the row-kernel variants
// launch src's templates (cuda/rmsnorm_backward_kernels.cuh) at other parameters.
#include "rmsnorm_lab.h"

#include <cstdint>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/rmsnorm_backward_kernels.cuh"
#include "kernels/cuda/runtime.h"

namespace llmt::lab {
namespace {

using kernels::cuda::bf16;
using kernels::cuda::cvt;
using kernels::cuda::ldf;
using kernels::cuda::warp_sum;

constexpr int kWarps = 8;
constexpr long kMaxBackwardBlocks = 264;  // ~2 blocks per SM of an H100 (132 SMs), as layernorm.cu
constexpr int kMaxVecsPerLane = 8;

template <typename T>
constexpr int kVec = 16 / static_cast<int>(sizeof(T));

template <typename T>
__device__ __forceinline__ void unpack(float (&f)[kVec<T>], const uint4& raw) {
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int q = 0; q < kVec<T>; q++) f[q] = ldf(e[q]);
}

// Backward of one row: n = x rstd, dn = dout w; dx += rstd (dn - n mean(dn n)); dweight += dout n.
// Shared memory: C floats (the block's dweight partial).
template <typename T, int kV>
__global__ void rmsnorm_backward_v1_kernel(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight,
                                           const float* rstd, long rows, int C) {
    constexpr int V = kVec<T>;
    extern __shared__ float sdw[];
    for (int c = threadIdx.x; c < C; c += blockDim.x) sdw[c] = 0.0f;
    __syncthreads();
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int nvec = C / V;
    const uint4* wv = reinterpret_cast<const uint4*>(weight);
    float dw[kV][V];
#pragma unroll
    for (int v = 0; v < kV; v++)
#pragma unroll
        for (int q = 0; q < V; q++) dw[v][q] = 0.0f;
    for (long row = blockIdx.x * static_cast<long>(kWarps) + warp; row < rows;
         row += static_cast<long>(gridDim.x) * kWarps) {
        const uint4* xr = reinterpret_cast<const uint4*>(inp + row * C);
        const uint4* gr = reinterpret_cast<const uint4*>(dout + row * C);
        uint4* dr = reinterpret_cast<uint4*>(dinp + row * C);
        const float r = rstd[row];
        uint4 xs[kV], gs[kV];
        float a = 0.0f;
#pragma unroll
        for (int v = 0; v < kV; v++) {
            const int idx = v * 32 + lane;
            if (idx >= nvec) break;
            xs[v] = xr[idx];
            gs[v] = gr[idx];
            float x[V], g[V], w[V];
            unpack<T>(x, xs[v]);
            unpack<T>(g, gs[v]);
            unpack<T>(w, wv[idx]);
#pragma unroll
            for (int q = 0; q < V; q++) {
                const float n = x[q] * r;
                a += w[q] * g[q] * n;
                dw[v][q] += n * g[q];
            }
        }
        a = warp_sum(a) / C;
#pragma unroll
        for (int v = 0; v < kV; v++) {
            const int idx = v * 32 + lane;
            if (idx >= nvec) break;
            float x[V], g[V], w[V], d[V];
            unpack<T>(x, xs[v]);
            unpack<T>(g, gs[v]);
            unpack<T>(w, wv[idx]);
            unpack<T>(d, dr[idx]);
            uint4 o;
            T* eo = reinterpret_cast<T*>(&o);
#pragma unroll
            for (int q = 0; q < V; q++) eo[q] = cvt<T>(d[q] + (w[q] * g[q] - x[q] * r * a) * r);
            dr[idx] = o;
        }
    }
#pragma unroll
    for (int v = 0; v < kV; v++) {
        const int idx = v * 32 + lane;
        if (idx >= nvec) break;
#pragma unroll
        for (int q = 0; q < V; q++) atomicAdd(&sdw[idx * V + q], dw[v][q]);
    }
    __syncthreads();
    for (int c = threadIdx.x; c < C; c += blockDim.x) atomicAdd(&dweight[c], sdw[c]);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Vectors per lane for width C (0: not a width version 1 takes).
int vecs_per_lane(int C, int elem_bytes, const void* dinp, const void* dout, const void* inp, const void* weight) {
    const int per_vec = 16 / elem_bytes;
    if (C <= 0 || C % per_vec != 0) return 0;
    if (!aligned16(dinp) || !aligned16(dout) || !aligned16(inp) || !aligned16(weight)) return 0;
    const int per_lane = (C / per_vec + 31) / 32;
    for (int k = 1; k <= kMaxVecsPerLane; k *= 2)
        if (per_lane <= k) return k;
    return 0;
}

template <typename T>
void backward_v1(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight, const float* rstd, int B,
                 int T_, int C, cudaStream_t stream) {
    const long rows = static_cast<long>(B) * T_;
    const int k = vecs_per_lane(C, sizeof(T), dinp, dout, inp, weight);
    if (k == 0 || rows <= 0)
        throw InternalError("rmsnorm_backward_v1: width " + std::to_string(C) + " or " + std::to_string(rows) +
                            " rows not supported by the lab's version 1");
    long grid = (rows + kWarps - 1) / kWarps;
    if (grid > kMaxBackwardBlocks) grid = kMaxBackwardBlocks;
    const size_t smem = sizeof(float) * static_cast<size_t>(C);
    auto launch = [&](auto kernel) {
        if (smem > 48 * 1024)
            LLMT_CUDA_CHECK(
                cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
        kernel<<<static_cast<unsigned>(grid), kWarps * 32, smem, stream>>>(dinp, dweight, dout, inp, weight, rstd,
                                                                          rows, C);
        LLMT_CUDA_CHECK_LAUNCH("rmsnorm_backward_v1_kernel");
    };
    switch (k) {
        case 1: return launch(rmsnorm_backward_v1_kernel<T, 1>);
        case 2: return launch(rmsnorm_backward_v1_kernel<T, 2>);
        case 4: return launch(rmsnorm_backward_v1_kernel<T, 4>);
        default: return launch(rmsnorm_backward_v1_kernel<T, 8>);
    }
}

}  // namespace

bool rmsnorm_backward_v1_supports(int C, int elem_bytes, const void* dinp, const void* dout, const void* inp,
                                  const void* weight) {
    return vecs_per_lane(C, elem_bytes, dinp, dout, inp, weight) > 0;
}

void rmsnorm_backward_v1(bf16* dinp, float* dweight, const bf16* dout, const bf16* inp, const bf16* weight,
                         const float* rstd, int B, int T, int C, cudaStream_t s) {
    backward_v1(dinp, dweight, dout, inp, weight, rstd, B, T, C, s);
}

void rmsnorm_backward_v1(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                         const float* rstd, int B, int T, int C, cudaStream_t s) {
    backward_v1(dinp, dweight, dout, inp, weight, rstd, B, T, C, s);
}

void rmsnorm_backward_rows(bf16* dinp, float* dweight, const bf16* dout, const bf16* inp, const bf16* weight,
                           const float* rstd, int B, int T, int C, int rows_per_step, int max_blocks_per_sm,
                           bool with_dweight, cudaStream_t s) {
    namespace rms = kernels::cuda::rms;
    const long rows = static_cast<long>(B) * T;
    const int threads = (C / 8 + 31) / 32 * 32;
    if (C <= 0 || C % 8 != 0 || C / 8 > rms::kMaxBwdThreads || rows <= 0 || !aligned16(dinp) || !aligned16(dout) ||
        !aligned16(inp) || !aligned16(weight))
        throw InternalError("rmsnorm_backward_rows: width " + std::to_string(C) + " or " + std::to_string(rows) +
                            " rows not supported by the lab (bf16, C a multiple of 8 up to 4096, aligned)");
    auto run = [&](auto rows_per_step_tag) {
        constexpr int kR = decltype(rows_per_step_tag)::value;
        if (with_dweight)
            return rms::backward_rows<bf16, 8, 1, kR>(dinp, dweight, dout, inp, weight, rstd, rows, C, threads, s,
                                                      max_blocks_per_sm);
        const long grid = rms::rows_grid<bf16, 8, 1, kR>(rows, threads, max_blocks_per_sm);
        float* partial =
            kernels::cuda::partial_buffer(kernels::cuda::partial_scratch(), static_cast<size_t>(grid) * C);
        rms::rmsnorm_backward_rows_kernel<bf16, 8, 1, kR>
            <<<static_cast<unsigned>(grid), threads, 0, s>>>(dinp, partial, dout, inp, weight, rstd, rows, C);
        LLMT_CUDA_CHECK_LAUNCH("rmsnorm_backward_rows_kernel");
    };
    switch (rows_per_step) {
        case 1: return run(std::integral_constant<int, 1>{});
        case 2: return run(std::integral_constant<int, 2>{});
        case 4: return run(std::integral_constant<int, 4>{});
        case 8: return run(std::integral_constant<int, 8>{});
        default: throw InternalError("rmsnorm_backward_rows: rows_per_step " + std::to_string(rows_per_step) +
                                     " is not 1, 2, 4 or 8");
    }
}

}  // namespace llmt::lab
