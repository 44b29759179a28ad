// Per-head q/k RMSNorm on CUDA (cuda/head_rmsnorm.h). Forward: one warp per (row, head) of the fused row, the
// head's pairs of elements in the lane's registers (lane l holds channels 2l, 2l+1, 2l+64, ...), so the head is
// read once; value heads are copied. Backward: a block of kWarps warps takes rows blockIdx.x, blockIdx.x +
// gridDim.x, ...; warp w takes heads w, w + kWarps, ... of each row and keeps its share of the weights' gradients
// in registers; at the end the warps' shares are added in warp order into the block's partial (2*HS floats) and a
// second kernel adds the partials in block order (no atomics: the same bits on every run on one GPU model).
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/head_rmsnorm.h"
#include "kernels/cuda/partial_scratch.cuh"
#include "kernels/cuda/runtime.h"

namespace llmt::kernels::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kMaxHs = 256;

__device__ __forceinline__ float2 ld2(const float* p) { return *reinterpret_cast<const float2*>(p); }
__device__ __forceinline__ float2 ld2(const bf16* p) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
}
__device__ __forceinline__ void st2(float* p, float a, float b) { *reinterpret_cast<float2*>(p) = make_float2(a, b); }
__device__ __forceinline__ void st2(bf16* p, float a, float b) {
    *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(a, b);
}

// P: element pairs per lane (HS <= 64 * P).
template <typename T, int P>
__global__ void head_rmsnorm_forward_kernel(T* out, float* rstd, const T* inp, const T* q_weight, const T* k_weight,
                                            float eps, long N, int NH, int KV, int HS) {
    const int lane = threadIdx.x % 32, H3 = NH + 2 * KV;
    const long gw = (static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
    if (gw >= N * H3) return;
    const long r = gw / H3;
    const int h = static_cast<int>(gw % H3);
    const long off = gw * HS;  // (r * H3 + h) * HS
    const T* x = inp + off;
    T* o = out + off;
    if (h >= NH + KV) {  // a value head: copied
        for (int c = 2 * lane; c < HS; c += 64) {
            const float2 v = ld2(x + c);
            st2(o + c, v.x, v.y);
        }
        return;
    }
    float2 v[P];
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < P; k++) {
        const int c = 2 * lane + 64 * k;
        v[k] = c < HS ? ld2(x + c) : make_float2(0.0f, 0.0f);
        ss += v[k].x * v[k].x + v[k].y * v[k].y;
    }
    const float s = 1.0f / sqrtf(warp_sum(ss) / HS + eps);
    const T* w = h < NH ? q_weight : k_weight;
#pragma unroll
    for (int k = 0; k < P; k++) {
        const int c = 2 * lane + 64 * k;
        if (c < HS) {
            const float2 wv = ld2(w + c);
            st2(o + c, v[k].x * s * wv.x, v[k].y * s * wv.y);
        }
    }
    if (lane == 0) rstd[r * (NH + KV) + h] = s;
}

// One head's backward (with xhat = x s): dx = s (dy w - xhat mean(dy w xhat)); the lane's share of dw (+= dy xhat)
// into acc. dx may alias dy (each lane reads its elements before it writes them).
template <typename T, int P>
__device__ __forceinline__ void head_backward(T* dx, float (&acc)[P][2], const T* dy, const T* x,
                                              const float (&w)[P][2], float s, int HS, int lane) {
    float2 xv[P], gv[P];
    float dot = 0.0f;
#pragma unroll
    for (int k = 0; k < P; k++) {
        const int c = 2 * lane + 64 * k;
        xv[k] = c < HS ? ld2(x + c) : make_float2(0.0f, 0.0f);
        gv[k] = c < HS ? ld2(dy + c) : make_float2(0.0f, 0.0f);
        const float hx = xv[k].x * s, hy = xv[k].y * s;
        dot += gv[k].x * w[k][0] * hx + gv[k].y * w[k][1] * hy;
        acc[k][0] += gv[k].x * hx;
        acc[k][1] += gv[k].y * hy;
    }
    const float mean = warp_sum(dot) / HS;
#pragma unroll
    for (int k = 0; k < P; k++) {
        const int c = 2 * lane + 64 * k;
        if (c < HS)
            st2(dx + c, s * (gv[k].x * w[k][0] - xv[k].x * s * mean), s * (gv[k].y * w[k][1] - xv[k].y * s * mean));
    }
}

// partial (gridDim.x, 2*HS): this block's sums of the q weight's gradient (HS), then the k weight's.
template <typename T, int P>
__global__ void __launch_bounds__(kWarps * 32)
    head_rmsnorm_backward_kernel(T* dinp, float* partial, const T* dout, const T* inp, const T* q_weight,
                                 const T* k_weight, const float* rstd, long N, int NH, int KV, int HS) {
    __shared__ float red[kWarps][2 * kMaxHs];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, H3 = NH + 2 * KV;
    float wq[P][2], wk[P][2], aq[P][2], ak[P][2];
#pragma unroll
    for (int k = 0; k < P; k++) {
        const int c = 2 * lane + 64 * k;
        const float2 a = c < HS ? ld2(q_weight + c) : make_float2(0.0f, 0.0f);
        const float2 b = c < HS ? ld2(k_weight + c) : make_float2(0.0f, 0.0f);
        wq[k][0] = a.x;
        wq[k][1] = a.y;
        wk[k][0] = b.x;
        wk[k][1] = b.y;
        aq[k][0] = aq[k][1] = ak[k][0] = ak[k][1] = 0.0f;
    }
    for (long r = blockIdx.x; r < N; r += gridDim.x) {
        for (int h = warp; h < H3; h += kWarps) {
            const long off = (r * H3 + h) * HS;
            if (h >= NH + KV) {  // a value head: its gradient passes through
                if (dinp != dout)
                    for (int c = 2 * lane; c < HS; c += 64) {
                        const float2 v = ld2(dout + off + c);
                        st2(dinp + off + c, v.x, v.y);
                    }
                continue;
            }
            const float s = rstd[r * (NH + KV) + h];
            if (h < NH) head_backward<T, P>(dinp + off, aq, dout + off, inp + off, wq, s, HS, lane);
            else head_backward<T, P>(dinp + off, ak, dout + off, inp + off, wk, s, HS, lane);
        }
    }
#pragma unroll
    for (int k = 0; k < P; k++) {
        const int c = 2 * lane + 64 * k;
        if (c < HS) {
            red[warp][c] = aq[k][0];
            red[warp][c + 1] = aq[k][1];
            red[warp][HS + c] = ak[k][0];
            red[warp][HS + c + 1] = ak[k][1];
        }
    }
    __syncthreads();
    for (int c = threadIdx.x; c < 2 * HS; c += kWarps * 32) {
        float t = 0.0f;
#pragma unroll
        for (int w = 0; w < kWarps; w++) t += red[w][c];
        partial[static_cast<long>(blockIdx.x) * 2 * HS + c] = t;
    }
}

// dq_weight[c] += sum over blocks of partial[b][c], dk_weight[c] += that of partial[b][HS + c], in block order.
__global__ void head_weight_sum_kernel(float* dq_weight, float* dk_weight, const float* partial, int nparts, int HS) {
    const int c = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (c >= 2 * HS) return;
    float t = 0.0f;
    for (int b = 0; b < nparts; b++) t += partial[static_cast<long>(b) * 2 * HS + c];
    if (c < HS) dq_weight[c] += t;
    else dk_weight[c - HS] += t;
}

// Pairs per lane for HS: 1 (HS <= 64), 2 (<= 128) or 4 (<= 256); odd or larger heads are refused.
int pairs_per_lane(int HS) {
    if (HS < 2 || HS % 2 != 0 || HS > kMaxHs)
        throw_cuda_error("head_rmsnorm: the head size must be even and at most 256", cudaErrorInvalidValue, __FILE__,
                         __LINE__);
    return HS <= 64 ? 1 : HS <= 128 ? 2 : 4;
}

template <typename T, int P>
void forward_p(T* out, float* rstd, const T* inp, const T* q_weight, const T* k_weight, float eps, long N, int NH,
               int KV, int HS, cudaStream_t stream) {
    const long warps = N * (NH + 2 * KV);
    head_rmsnorm_forward_kernel<T, P><<<grid_for(warps * 32, kWarps * 32, (1L << 31) - 1), kWarps * 32, 0, stream>>>(
        out, rstd, inp, q_weight, k_weight, eps, N, NH, KV, HS);
    LLMT_CUDA_CHECK_LAUNCH("head_rmsnorm_forward_kernel");
}

template <typename T>
void forward_t(T* out, float* rstd, const T* inp, const T* q_weight, const T* k_weight, float eps, long N, int NH,
               int KV, int HS, cudaStream_t stream) {
    switch (pairs_per_lane(HS)) {
        case 1: forward_p<T, 1>(out, rstd, inp, q_weight, k_weight, eps, N, NH, KV, HS, stream); break;
        case 2: forward_p<T, 2>(out, rstd, inp, q_weight, k_weight, eps, N, NH, KV, HS, stream); break;
        default: forward_p<T, 4>(out, rstd, inp, q_weight, k_weight, eps, N, NH, KV, HS, stream); break;
    }
}

template <typename T, int P>
void backward_p(T* dinp, float* dq_weight, float* dk_weight, const T* dout, const T* inp, const T* q_weight,
                const T* k_weight, const float* rstd, long N, int NH, int KV, int HS, cudaStream_t stream) {
    PartialScratch& sc = partial_scratch();
    const long grid = N < 2L * sc.sms ? N : 2L * sc.sms;  // two blocks per SM (or one per row)
    float* partial = partial_buffer(sc, static_cast<size_t>(grid) * 2 * HS);
    head_rmsnorm_backward_kernel<T, P><<<static_cast<unsigned>(grid), kWarps * 32, 0, stream>>>(
        dinp, partial, dout, inp, q_weight, k_weight, rstd, N, NH, KV, HS);
    LLMT_CUDA_CHECK_LAUNCH("head_rmsnorm_backward_kernel");
    head_weight_sum_kernel<<<static_cast<unsigned>((2 * HS + 127) / 128), 128, 0, stream>>>(
        dq_weight, dk_weight, partial, static_cast<int>(grid), HS);
    LLMT_CUDA_CHECK_LAUNCH("head_weight_sum_kernel");
}

template <typename T>
void backward_t(T* dinp, float* dq_weight, float* dk_weight, const T* dout, const T* inp, const T* q_weight,
                const T* k_weight, const float* rstd, long N, int NH, int KV, int HS, cudaStream_t stream) {
    if (N == 0) return;
    const int P = pairs_per_lane(HS);
    if (P == 1)
        backward_p<T, 1>(dinp, dq_weight, dk_weight, dout, inp, q_weight, k_weight, rstd, N, NH, KV, HS, stream);
    else if (P == 2)
        backward_p<T, 2>(dinp, dq_weight, dk_weight, dout, inp, q_weight, k_weight, rstd, N, NH, KV, HS, stream);
    else backward_p<T, 4>(dinp, dq_weight, dk_weight, dout, inp, q_weight, k_weight, rstd, N, NH, KV, HS, stream);
}

}  // namespace

#define LLMT_HEAD_RMSNORM_DEF(T)                                                                                    \
    void head_rmsnorm_forward(T* out, float* rstd, const T* inp, const T* q_weight, const T* k_weight, float eps,  \
                              long N, int NH, int KV, int HS, cudaStream_t stream) {                               \
        if (N > 0) forward_t(out, rstd, inp, q_weight, k_weight, eps, N, NH, KV, HS, stream);                      \
    }                                                                                                               \
    void head_rmsnorm_backward(T* dinp, float* dq_weight, float* dk_weight, const T* dout, const T* inp,          \
                               const T* q_weight, const T* k_weight, const float* rstd, long N, int NH, int KV,    \
                               int HS, cudaStream_t stream) {                                                      \
        backward_t(dinp, dq_weight, dk_weight, dout, inp, q_weight, k_weight, rstd, N, NH, KV, HS, stream);        \
    }
LLMT_HEAD_RMSNORM_DEF(float)
LLMT_HEAD_RMSNORM_DEF(bf16)
#undef LLMT_HEAD_RMSNORM_DEF

}  // namespace llmt::kernels::cuda
