// Device helpers shared by the CUDA kernels (.cu only): warp/block reductions and launch sizing.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>

namespace llmt::kernels::cuda {

constexpr unsigned kFullMask = 0xffffffffu;

using bf16 = __nv_bfloat16;

// Element loads/stores of the kernels templated on the storage type (float or bf16): arithmetic is
// always fp32; a bf16 store rounds to nearest even.
__device__ __forceinline__ float ldf(float x) { return x; }
__device__ __forceinline__ float ldf(bf16 x) { return __bfloat162float(x); }
template <typename T>
__device__ __forceinline__ T cvt(float x);
template <>
__device__ __forceinline__ float cvt<float>(float x) { return x; }
template <>
__device__ __forceinline__ bf16 cvt<bf16>(float x) { return __float2bfloat16_rn(x); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
    return v;
}

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
    return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
// `scratch` holds 32 values; the call ends with a barrier, so scratch may be reused right after.
template <typename T>
__device__ __forceinline__ T block_sum(T v, T* scratch) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    v = warp_sum(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    T r = lane < nwarps ? scratch[lane] : T(0);
    r = warp_sum(r);
    __syncthreads();
    return r;
}

// The run of a sorted run table (begin[0..n), ascending) that element e is at or past: the last r with
// begin[r] <= e (0 when e precedes them all). For a thread walking elements upwards: pass r = -1 the first
// time (a binary search), then the previous result (it only moves forward). The optimizers' run kernels.
__device__ __forceinline__ int run_at(const long long* begin, int n, long long e, int r) {
    if (r < 0) {
        int lo = 0, hi = n - 1;
        while (lo < hi) {
            const int mid = (lo + hi + 1) / 2;
            if (begin[mid] <= e) lo = mid;
            else hi = mid - 1;
        }
        r = lo;
    }
    while (r + 1 < n && begin[r + 1] <= e) r++;
    return r;
}

// One step of a max-pool window's running maximum, as maxpool2d_forward defines it (cpu/maxpool.h): the
// first maximum in scan order, a NaN winning over numbers. The pooling kernels (conv.cu, conv_pool.cu).
__device__ __forceinline__ void pool_take(float v, int32_t idx, float& best, int32_t& arg) {
    if (arg < 0 || v > best || (isnan(v) && !isnan(best))) {
        best = v;
        arg = idx;
    }
}

inline unsigned grid_for(long n, int block, long max_blocks = 65536L * 8) {
    long g = (n + block - 1) / block;
    if (g < 1) g = 1;
    return static_cast<unsigned>(g < max_blocks ? g : max_blocks);
}

}  // namespace llmt::kernels::cuda
