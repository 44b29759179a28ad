// LayerNorm on CUDA (cuda/layernorm.h): one warp per row, two-pass mean/variance in fp32 like the CPU
// kernel; the backward is llm.c's formula with per-block shared-memory partials of dweight/dbias.
// Templated on the storage type of activations and weights (fp32 or bf16); statistics stay fp32.
#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/runtime.h"

namespace llmt::kernels::cuda {
namespace {

constexpr int kWarps = 8;
constexpr long kMaxBackwardBlocks = 264;  // ~2 blocks per SM of an H100 (132 SMs)

template <typename T>
__global__ void layernorm_forward_kernel(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                                         const T* bias, float eps, long rows, int C) {
    const int lane = threadIdx.x % 32;
    const long row = blockIdx.x * static_cast<long>(kWarps) + threadIdx.x / 32;
    if (row >= rows) return;
    const T* x = inp + row * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += 32) s += ldf(x[c]);
    const float m = warp_sum(s) / C;
    float v = 0.0f;
    for (int c = lane; c < C; c += 32) {
        const float d = ldf(x[c]) - m;
        v += d * d;
    }
    const float r = 1.0f / sqrtf(warp_sum(v) / C + eps);
    T* o = out + row * C;
    for (int c = lane; c < C; c += 32) o[c] = cvt<T>((ldf(x[c]) - m) * r * ldf(weight[c]) + ldf(bias[c]));
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

// bf16, C = 256 * kVecs: one warp per row; lane l holds the 8-column groups l, l + 32, ... in registers
// (16-byte loads), so the row is read from memory once and both passes (mean, then variance) run on
// registers. The generic kernel above re-reads the row three times with 2-byte loads.
template <int kVecs>
__global__ void layernorm_forward_bf16x8_kernel(bf16* out, float* mean, float* rstd, const bf16* inp,
                                                const bf16* weight, const bf16* bias, float eps, long rows,
                                                int C) {
    const int lane = threadIdx.x % 32;
    const long row = blockIdx.x * static_cast<long>(kWarps) + threadIdx.x / 32;
    if (row >= rows) return;
    const uint4* xr = reinterpret_cast<const uint4*>(inp + row * C);
    float x[kVecs * 8];
    float s = 0.0f;
#pragma unroll
    for (int v = 0; v < kVecs; v++) {
        const uint4 raw = xr[v * 32 + lane];
        const bf16* e = reinterpret_cast<const bf16*>(&raw);
#pragma unroll
        for (int q = 0; q < 8; q++) {
            x[v * 8 + q] = ldf(e[q]);
            s += x[v * 8 + q];
        }
    }
    const float m = warp_sum(s) / C;
    float var = 0.0f;
#pragma unroll
    for (int i = 0; i < kVecs * 8; i++) {
        const float d = x[i] - m;
        var += d * d;
    }
    const float r = 1.0f / sqrtf(warp_sum(var) / C + eps);
    const uint4* wv = reinterpret_cast<const uint4*>(weight);
    const uint4* bv = reinterpret_cast<const uint4*>(bias);
    uint4* orow = reinterpret_cast<uint4*>(out + row * C);
#pragma unroll
    for (int v = 0; v < kVecs; v++) {
        const uint4 ww = wv[v * 32 + lane], bb = bv[v * 32 + lane];
        const bf16* we = reinterpret_cast<const bf16*>(&ww);
        const bf16* be = reinterpret_cast<const bf16*>(&bb);
        uint4 o;
        bf16* oe = reinterpret_cast<bf16*>(&o);
#pragma unroll
        for (int q = 0; q < 8; q++) oe[q] = __float2bfloat16_rn((x[v * 8 + q] - m) * r * ldf(we[q]) + ldf(be[q]));
        orow[v * 32 + lane] = o;
    }
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

// Dynamic shared memory: dweight and dbias partials (2C floats).
template <typename T>
__global__ void layernorm_backward_kernel(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp,
                                          const T* weight, const float* mean, const float* rstd, long rows,
                                          int C) {
    extern __shared__ float sh[];
    float* sdw = sh;
    float* sdb = sh + C;
    for (int c = threadIdx.x; c < 2 * C; c += blockDim.x) sh[c] = 0.0f;
    __syncthreads();
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (long row = blockIdx.x * static_cast<long>(kWarps) + warp; row < rows;
         row += static_cast<long>(gridDim.x) * kWarps) {
        const T* x = inp + row * C;
        const T* g = dout + row * C;
        const float m = mean[row], r = rstd[row];
        float a = 0.0f, b = 0.0f;  // sum dnorm, sum dnorm * norm
        for (int c = lane; c < C; c += 32) {
            const float n = (ldf(x[c]) - m) * r;
            const float dn = ldf(weight[c]) * ldf(g[c]);
            a += dn;
            b += dn * n;
        }
        a = warp_sum(a) / C;
        b = warp_sum(b) / C;
        T* di = dinp + row * C;
        for (int c = lane; c < C; c += 32) {
            const float n = (ldf(x[c]) - m) * r;
            const float gc = ldf(g[c]);
            const float dn = ldf(weight[c]) * gc;
            atomicAdd(&sdb[c], gc);
            atomicAdd(&sdw[c], n * gc);
            di[c] = cvt<T>(ldf(di[c]) + (dn - a - n * b) * r);
        }
    }
    __syncthreads();
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        atomicAdd(&dweight[c], sdw[c]);
        atomicAdd(&dbias[c], sdb[c]);
    }
}


// bf16, C = 256 * kVecs: lane l of a warp owns the 8-column groups l, l + 32, ... (kVecs of them), read
// with 16-byte loads. Each warp keeps its dweight/dbias partials in registers across its rows, so the
// block combines them once instead of once per row and element. dinp's row is loaded together with x and
// dout (before the row's reductions), so a row costs one memory round trip; the registers that hold it
// leave 2 blocks per SM (the grid's default). kWarpRows: each warp stores its partials to its own
// shared-memory row (8 x 2C floats) and the block sums the rows, instead of shared atomics of all warps
// on one row (float atomics that contend across warps); needs 2C * 8 floats of shared memory.
// kColsum (with kWarpRows): also dcolsum += the column sums of the updated dinp rows (a third partial row
// per warp, 3C * 8 floats): the bias gradient of the linear layer whose output fed this residual stream,
// without a pass of its own over dinp.
template <int kVecs, bool kWarpRows, bool kColsum>
__global__ void __launch_bounds__(kWarps * 32, 2)
    layernorm_backward_bf16x8_kernel(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                                     const bf16* weight, const float* mean, const float* rstd, long rows, int C,
                                     float* dcolsum) {
    static_assert(!kColsum || kWarpRows, "the column sums use the per-warp partial rows");
    constexpr int kR = kColsum ? 3 : 2;  // partial rows per warp: dweight, dbias [, dcolsum]
    extern __shared__ float sh[];
    float* sdw = sh;
    float* sdb = sh + C;
    if constexpr (!kWarpRows) {
        for (int c = threadIdx.x; c < 2 * C; c += blockDim.x) sh[c] = 0.0f;
        __syncthreads();
    }
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    constexpr int kN = kVecs * 8;
    // Only the parameter-gradient partials stay in registers across rows; x, dout and the weight are
    // re-read in the second pass (L1 hits).
    float dw[kN], db[kN], ds[kColsum ? kN : 1];
#pragma unroll
    for (int i = 0; i < kN; i++) dw[i] = db[i] = 0.0f;
#pragma unroll
    for (int i = 0; i < (kColsum ? kN : 1); i++) ds[i] = 0.0f;
    const uint4* wv = reinterpret_cast<const uint4*>(weight);
    for (long row = blockIdx.x * static_cast<long>(kWarps) + warp; row < rows;
         row += static_cast<long>(gridDim.x) * kWarps) {
        const uint4* xr = reinterpret_cast<const uint4*>(inp + row * C);
        const uint4* gr = reinterpret_cast<const uint4*>(dout + row * C);
        uint4* dr = reinterpret_cast<uint4*>(dinp + row * C);
        const float m = mean[row], r = rstd[row];
        float a = 0.0f, b = 0.0f;  // sum dnorm, sum dnorm * norm
        uint4 dpre[kVecs];
#pragma unroll
        for (int v = 0; v < kVecs; v++) dpre[v] = dr[v * 32 + lane];
#pragma unroll
        for (int v = 0; v < kVecs; v++) {
            const uint4 xv = xr[v * 32 + lane], gv = gr[v * 32 + lane], ww = wv[v * 32 + lane];
            const bf16* xe = reinterpret_cast<const bf16*>(&xv);
            const bf16* ge = reinterpret_cast<const bf16*>(&gv);
            const bf16* we = reinterpret_cast<const bf16*>(&ww);
#pragma unroll
            for (int q = 0; q < 8; q++) {
                const float n = (ldf(xe[q]) - m) * r, g = ldf(ge[q]);
                const float dn = ldf(we[q]) * g;
                a += dn;
                b += dn * n;
                dw[v * 8 + q] += n * g;
                db[v * 8 + q] += g;
            }
        }
        a = warp_sum(a) / C;
        b = warp_sum(b) / C;
#pragma unroll
        for (int v = 0; v < kVecs; v++) {
            const uint4 xv = xr[v * 32 + lane], gv = gr[v * 32 + lane], ww = wv[v * 32 + lane];
            const bf16* xe = reinterpret_cast<const bf16*>(&xv);
            const bf16* ge = reinterpret_cast<const bf16*>(&gv);
            const bf16* we = reinterpret_cast<const bf16*>(&ww);
            uint4 dv = dpre[v];
            bf16* de = reinterpret_cast<bf16*>(&dv);
#pragma unroll
            for (int q = 0; q < 8; q++) {
                const float n = (ldf(xe[q]) - m) * r;
                de[q] = __float2bfloat16_rn(ldf(de[q]) + (ldf(we[q]) * ldf(ge[q]) - a - n * b) * r);
                if constexpr (kColsum) ds[v * 8 + q] += ldf(de[q]);  // the stored (rounded) value
            }
            dr[v * 32 + lane] = dv;
        }
    }
    if constexpr (kWarpRows) {
        // This warp's dweight row, then its dbias row [, then its dcolsum row].
        float* row_w = sh + static_cast<long>(warp) * kR * C;
#pragma unroll
        for (int v = 0; v < kVecs; v++) {
            float4* pw = reinterpret_cast<float4*>(row_w + (v * 32 + lane) * 8);
            float4* pb = reinterpret_cast<float4*>(row_w + C + (v * 32 + lane) * 8);
            pw[0] = make_float4(dw[v * 8 + 0], dw[v * 8 + 1], dw[v * 8 + 2], dw[v * 8 + 3]);
            pw[1] = make_float4(dw[v * 8 + 4], dw[v * 8 + 5], dw[v * 8 + 6], dw[v * 8 + 7]);
            pb[0] = make_float4(db[v * 8 + 0], db[v * 8 + 1], db[v * 8 + 2], db[v * 8 + 3]);
            pb[1] = make_float4(db[v * 8 + 4], db[v * 8 + 5], db[v * 8 + 6], db[v * 8 + 7]);
            if constexpr (kColsum) {
                float4* ps = reinterpret_cast<float4*>(row_w + 2 * C + (v * 32 + lane) * 8);
                ps[0] = make_float4(ds[v * 8 + 0], ds[v * 8 + 1], ds[v * 8 + 2], ds[v * 8 + 3]);
                ps[1] = make_float4(ds[v * 8 + 4], ds[v * 8 + 5], ds[v * 8 + 6], ds[v * 8 + 7]);
            }
        }
        __syncthreads();
        // Sum the warps' rows into row 0 (thread c owns columns c, c + blockDim.x, ...; row 0 is read
        // before it is overwritten by the same thread).
        for (int c = threadIdx.x; c < kR * C; c += blockDim.x) {
            float t = 0.0f;
#pragma unroll
            for (int w = 0; w < kWarps; w++) t += sh[static_cast<long>(w) * kR * C + c];
            sh[c] = t;
        }
    } else {
#pragma unroll
        for (int v = 0; v < kVecs; v++)
#pragma unroll
            for (int q = 0; q < 8; q++) {
                const int c = (v * 32 + lane) * 8 + q;
                atomicAdd(&sdw[c], dw[v * 8 + q]);
                atomicAdd(&sdb[c], db[v * 8 + q]);
            }
    }
    __syncthreads();
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        atomicAdd(&dweight[c], sdw[c]);
        atomicAdd(&dbias[c], sdb[c]);
        if constexpr (kColsum) atomicAdd(&dcolsum[c], sh[2 * C + c]);
    }
}

// dcolsum non-null needs kWarpRows (the caller checks).
template <int kVecs, bool kWarpRows, bool kColsum>
void backward_bf16x8_t(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp, const bf16* weight,
                     const float* mean, const float* rstd, long rows, int C, cudaStream_t stream, float* dcolsum) {
    const size_t smem = sizeof(float) * (kColsum ? 3 : 2) * static_cast<size_t>(C) * (kWarpRows ? kWarps : 1);
    if (smem > 48 * 1024)
        LLMT_CUDA_CHECK(cudaFuncSetAttribute(layernorm_backward_bf16x8_kernel<kVecs, kWarpRows, kColsum>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    // At most 264 blocks (two per SM on an H100), each adding its dweight/dbias sums with global atomics:
    // measured faster than more blocks or per-block partial rows summed by a second kernel
    // (docs/benchmarks.md).
    long grid = (rows + kWarps - 1) / kWarps;
    if (grid > kMaxBackwardBlocks) grid = kMaxBackwardBlocks;
    layernorm_backward_bf16x8_kernel<kVecs, kWarpRows, kColsum>
        <<<static_cast<unsigned>(grid), kWarps * 32, smem, stream>>>(dinp, dweight, dbias, dout, inp, weight, mean,
                                                                    rstd, rows, C, dcolsum);
    LLMT_CUDA_CHECK_LAUNCH("layernorm_backward_bf16x8_kernel");
}

// Per-warp partial rows when they fit in 64 KiB of shared memory (C <= 1024: two blocks per SM keep room;
// 96 KiB with the column-sum row, C <= 1024 still), shared atomics otherwise. Returns false when dcolsum
// was asked for but not fused (the caller then sums dinp's columns itself).
template <int kVecs>
bool backward_bf16x8(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp, const bf16* weight,
                     const float* mean, const float* rstd, long rows, int C, cudaStream_t stream, float* dcolsum) {
    const size_t row_bytes = sizeof(float) * static_cast<size_t>(C) * kWarps;
    if (dcolsum && 3 * row_bytes <= 96 * 1024) {
        backward_bf16x8_t<kVecs, true, true>(dinp, dweight, dbias, dout, inp, weight, mean, rstd, rows, C, stream,
                                             dcolsum);
        return true;
    }
    if (2 * row_bytes <= 64 * 1024)
        backward_bf16x8_t<kVecs, true, false>(dinp, dweight, dbias, dout, inp, weight, mean, rstd, rows, C, stream,
                                              nullptr);
    else
        backward_bf16x8_t<kVecs, false, false>(dinp, dweight, dbias, dout, inp, weight, mean, rstd, rows, C, stream,
                                               nullptr);
    return dcolsum == nullptr;
}

// The vectorised kernel for C in {256, 512, ..., 2048} (rows 16-byte aligned). Returns 0 when it does not
// apply, 1 when it ran, 2 when it ran but left dcolsum to the caller.
int try_backward_bf16x8(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                        const bf16* weight, const float* mean, const float* rstd, long rows, int C,
                        cudaStream_t stream, float* dcolsum) {
    if (C % 256 != 0) return 0;
    bool fused = false;
    switch (C / 256) {
#define LLMT_LN_BWD_VEC(K)                                                                                         \
    case K:                                                                                                        \
        fused = backward_bf16x8<K>(dinp, dweight, dbias, dout, inp, weight, mean, rstd, rows, C, stream, dcolsum); \
        break;
        LLMT_LN_BWD_VEC(1)
        LLMT_LN_BWD_VEC(2)
        LLMT_LN_BWD_VEC(3)
        LLMT_LN_BWD_VEC(4)
        LLMT_LN_BWD_VEC(5)
        LLMT_LN_BWD_VEC(6)
        LLMT_LN_BWD_VEC(8)
#undef LLMT_LN_BWD_VEC
        default: return 0;
    }
    return fused ? 1 : 2;
}

template <typename T>
void forward_t(T* out, float* mean, float* rstd, const T* inp, const T* weight, const T* bias, float eps, int B,
               int T_, int C, cudaStream_t stream) {
    const long rows = static_cast<long>(B) * T_;
    const unsigned grid = static_cast<unsigned>((rows + kWarps - 1) / kWarps);
    if constexpr (std::is_same_v<T, bf16>) {
        if (C % 256 == 0 && C <= 2048 && C / 256 != 7) {  // 16-byte rows: C * 2 bytes is a multiple of 16
#define LLMT_LN_FWD_VEC(K)                                                                                     \
    case K:                                                                                                    \
        layernorm_forward_bf16x8_kernel<K><<<grid, kWarps * 32, 0, stream>>>(out, mean, rstd, inp, weight,   \
                                                                            bias, eps, rows, C);              \
        LLMT_CUDA_CHECK_LAUNCH("layernorm_forward_bf16x8_kernel");                                            \
        return;
            switch (C / 256) {
                LLMT_LN_FWD_VEC(1)
                LLMT_LN_FWD_VEC(2)
                LLMT_LN_FWD_VEC(3)
                LLMT_LN_FWD_VEC(4)
                LLMT_LN_FWD_VEC(5)
                LLMT_LN_FWD_VEC(6)
                LLMT_LN_FWD_VEC(8)
                default: break;
            }
#undef LLMT_LN_FWD_VEC
        }
    }
    layernorm_forward_kernel<<<grid, kWarps * 32, 0, stream>>>(out, mean, rstd, inp, weight, bias, eps, rows, C);
    LLMT_CUDA_CHECK_LAUNCH("layernorm_forward_kernel");
}

template <typename T>
void backward_t(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp, const T* weight,
                const float* mean, const float* rstd, int B, int T_, int C, cudaStream_t stream, float* dcolsum) {
    const long rows = static_cast<long>(B) * T_;
    if constexpr (std::is_same_v<T, bf16>) {
        const int ran = try_backward_bf16x8(dinp, dweight, dbias, dout, inp, weight, mean, rstd, rows, C, stream,
                                            dcolsum);
        if (ran == 2) add_column_sums(dcolsum, dinp, static_cast<int>(rows), C, stream);
        if (ran != 0) return;
    }
    const size_t smem = sizeof(float) * 2 * static_cast<size_t>(C);
    if (smem > 48 * 1024)
        LLMT_CUDA_CHECK(cudaFuncSetAttribute(layernorm_backward_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(smem)));
    long grid = (rows + kWarps - 1) / kWarps;
    if (grid > kMaxBackwardBlocks) grid = kMaxBackwardBlocks;  // enough rows per block to amortise the C atomics
    layernorm_backward_kernel<<<static_cast<unsigned>(grid), kWarps * 32, smem, stream>>>(
        dinp, dweight, dbias, dout, inp, weight, mean, rstd, rows, C);
    LLMT_CUDA_CHECK_LAUNCH("layernorm_backward_kernel");
    if (dcolsum) add_column_sums(dcolsum, dinp, static_cast<int>(rows), C, stream);
}

}  // namespace

#define LLMT_LAYERNORM_FOR(T)                                                                                     \
    void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight, const T* bias,         \
                           float eps, int B, int T_, int C, cudaStream_t stream) {                                \
        forward_t(out, mean, rstd, inp, weight, bias, eps, B, T_, C, stream);                                     \
    }                                                                                                             \
    void layernorm_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp, const T* weight,  \
                            const float* mean, const float* rstd, int B, int T_, int C, cudaStream_t stream,      \
                            float* dinp_colsum) {                                                                 \
        backward_t(dinp, dweight, dbias, dout, inp, weight, mean, rstd, B, T_, C, stream, dinp_colsum);           \
    }
LLMT_LAYERNORM_FOR(float)
LLMT_LAYERNORM_FOR(bf16)
#undef LLMT_LAYERNORM_FOR

}  // namespace llmt::kernels::cuda
