// Fused classifier on CUDA (cuda/classifier.h), templated on the logits' storage type (fp32 or bf16);
// the loss, the running max/sum and the gradient arithmetic are fp32.
#include <type_traits>

#include "kernels/cuda/classifier.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/runtime.h"

namespace llmt::kernels::cuda {
namespace {

constexpr int kBlock = 512;

// Combines per-thread online (max, sum of exp(x - max)) pairs across the block; every thread gets the
// result. Ends with a barrier.
__device__ void block_max_sum(float m, float s, float& m_out, float& s_out) {
    __shared__ float sm[32], ss[32];
    for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(kFullMask, m, o), s2 = __shfl_xor_sync(kFullMask, s, o);
        const float mm = fmaxf(m, m2);
        s = (m == -INFINITY ? 0.0f : s * expf(m - mm)) + (m2 == -INFINITY ? 0.0f : s2 * expf(m2 - mm));
        m = mm;
    }
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
    if (lane == 0) {
        sm[warp] = m;
        ss[warp] = s;
    }
    __syncthreads();
    float M = -INFINITY;
    for (int w = 0; w < nw; w++) M = fmaxf(M, sm[w]);
    float S = 0.0f;
    for (int w = 0; w < nw; w++)
        if (sm[w] != -INFINITY) S += ss[w] * expf(sm[w] - M);
    __syncthreads();
    m_out = M;
    s_out = S;
}

// Online (max, sum of exp(x - max)) over the row's first V columns, combined across the block.
template <typename T>
__device__ void row_max_sum(const T* x, int V, float& m_out, float& s_out) {
    float m = -INFINITY, s = 0.0f;
    for (int c = threadIdx.x; c < V; c += blockDim.x) {
        const float v = ldf(x[c]);
        if (v > m) {
            s = s * expf(m - v) + 1.0f;
            m = v;
        } else {
            s += expf(v - m);
        }
    }
    block_max_sum(m, s, m_out, s_out);
}

// bf16 rows with Vp % 8 == 0: 16-byte loads and stores (8 logits each), fast exp (__expf: ~2 ulp, far
// below bf16's resolution). Same modes and results as classifier_kernel; one block per row. The second
// pass's loads and the gradient's stores carry evict-first hints (the row is not read again, and the stores
// should not push rows that other blocks have yet to re-read out of L2): GPT-2 124M B=32 step on an H100,
// -0.5 ms with them (docs/benchmarks.md).
template <int kMode>
__global__ void classifier_bf16x8_kernel(float* losses, bf16* dst, const bf16* logits, const int32_t* targets,
                                         float dloss_scale, int V, int Vp) {
    const long row = blockIdx.x;
    const uint4* x = reinterpret_cast<const uint4*>(logits + row * Vp);
    uint4* y = dst ? reinterpret_cast<uint4*>(dst + row * Vp) : nullptr;
    const int nvec = Vp / 8;
    const int tgt = kMode == 2 ? 0 : targets[row];
    if (kMode != 2 && tgt < 0) {
        if (threadIdx.x == 0) losses[row] = 0.0f;
        if (kMode == 1)
            for (int i = threadIdx.x; i < nvec; i += blockDim.x) y[i] = make_uint4(0, 0, 0, 0);
        return;
    }
    const float xt = kMode == 2 ? 0.0f : ldf(logits[row * Vp + tgt]);  // read before any thread overwrites
    float m = -INFINITY, s = 0.0f;
    for (int i = threadIdx.x; i < nvec; i += blockDim.x) {
        const uint4 raw = x[i];
        const bf16* e = reinterpret_cast<const bf16*>(&raw);
        float v[8], mm = m;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            v[k] = i * 8 + k < V ? ldf(e[k]) : -INFINITY;
            mm = fmaxf(mm, v[k]);
        }
        if (mm == -INFINITY) continue;  // only padding columns so far
        s = m == -INFINITY ? 0.0f : s * __expf(m - mm);
#pragma unroll
        for (int k = 0; k < 8; k++) s += __expf(v[k] - mm);  // exp(-inf) = 0 for padding
        m = mm;
    }
    float M, S;
    block_max_sum(m, s, M, S);  // ends with a barrier: every thread has read its target logit already
    if (kMode != 2 && threadIdx.x == 0) losses[row] = M + logf(S) - xt;
    if (kMode == 0) return;
    const float k = (kMode == 1 ? dloss_scale : 1.0f) / S;
    for (int i = threadIdx.x; i < nvec; i += blockDim.x) {
        const uint4 raw = __ldcs(x + i);
        const bf16* e = reinterpret_cast<const bf16*>(&raw);
        uint4 out;
        bf16* o = reinterpret_cast<bf16*>(&out);
#pragma unroll
        for (int q = 0; q < 8; q++) {
            const int c = i * 8 + q;
            float g = c < V ? __expf(ldf(e[q]) - M) * k : 0.0f;
            if (kMode == 1 && c == tgt) g -= dloss_scale;
            o[q] = __float2bfloat16_rn(g);
        }
        __stcs(y + i, out);
    }
}

// mode 0: losses only; 1: losses and dlogits in place; 2: probs.
template <int kMode, typename T>
__global__ void classifier_kernel(float* losses, T* dst, const T* logits, const int32_t* targets,
                                  float dloss_scale, int V, int Vp) {
    const long row = blockIdx.x;
    const T* x = logits + row * Vp;
    T* y = dst ? dst + row * Vp : nullptr;
    const int tgt = kMode == 2 ? 0 : targets[row];
    if (kMode != 2 && tgt < 0) {
        if (threadIdx.x == 0) losses[row] = 0.0f;
        if (kMode == 1)
            for (int c = threadIdx.x; c < Vp; c += blockDim.x) y[c] = cvt<T>(0.0f);
        return;
    }
    const float xt = kMode == 2 ? 0.0f : ldf(x[tgt]);  // read before any thread overwrites the row
    float m, s;
    row_max_sum(x, V, m, s);  // ends with a barrier: every thread has read x[tgt] already
    if (kMode != 2 && threadIdx.x == 0) losses[row] = m + logf(s) - xt;
    if (kMode == 0) return;
    const float k = (kMode == 1 ? dloss_scale : 1.0f) / s;
    for (int c = threadIdx.x; c < Vp; c += blockDim.x) {
        float g = c < V ? expf(ldf(x[c]) - m) * k : 0.0f;
        if (kMode == 1 && c == tgt) g -= dloss_scale;
        y[c] = cvt<T>(g);
    }
}

// The 16-byte-vector kernel for bf16 rows whose width is a multiple of 8 (rows then start 16-byte
// aligned: arena views are 64-byte aligned).
template <typename T>
constexpr bool kVec8 = std::is_same_v<T, bf16>;

// classifier_bf16x8_kernel over `rows` rows.
template <int kMode>
void launch_bf16x8(float* losses, bf16* dst, const bf16* logits, const int32_t* targets, float dloss_scale, int V,
                   int Vp, long rows, cudaStream_t stream) {
    classifier_bf16x8_kernel<kMode><<<static_cast<unsigned>(rows), kBlock, 0, stream>>>(losses, dst, logits, targets,
                                                                                       dloss_scale, V, Vp);
    LLMT_CUDA_CHECK_LAUNCH("classifier_bf16x8_kernel");
}

template <typename T>
void forward_t(float* losses, const T* logits, const int32_t* targets, int B, int T_, int V, int Vp,
               cudaStream_t stream) {
    if constexpr (kVec8<T>) {
        if (Vp % 8 == 0) {
            launch_bf16x8<0>(losses, nullptr, logits, targets, 0.0f, V, Vp, static_cast<long>(B) * T_, stream);
            return;
        }
    }
    classifier_kernel<0, T><<<static_cast<unsigned>(static_cast<long>(B) * T_), kBlock, 0, stream>>>(
        losses, nullptr, logits, targets, 0.0f, V, Vp);
    LLMT_CUDA_CHECK_LAUNCH("classifier_kernel<forward>");
}

template <typename T>
void forward_backward_t(float* losses, T* logits, const int32_t* targets, float dloss_scale, int B, int T_, int V,
                        int Vp, cudaStream_t stream) {
    if constexpr (kVec8<T>) {
        if (Vp % 8 == 0) {
            launch_bf16x8<1>(losses, logits, logits, targets, dloss_scale, V, Vp, static_cast<long>(B) * T_, stream);
            return;
        }
    }
    classifier_kernel<1, T><<<static_cast<unsigned>(static_cast<long>(B) * T_), kBlock, 0, stream>>>(
        losses, logits, logits, targets, dloss_scale, V, Vp);
    LLMT_CUDA_CHECK_LAUNCH("classifier_kernel<forward_backward>");
}

template <typename T>
void softmax_t(T* probs, const T* logits, int B, int T_, int V, int Vp, cudaStream_t stream) {
    classifier_kernel<2, T><<<static_cast<unsigned>(static_cast<long>(B) * T_), kBlock, 0, stream>>>(
        nullptr, probs, logits, nullptr, 0.0f, V, Vp);
    LLMT_CUDA_CHECK_LAUNCH("classifier_kernel<softmax>");
}

}  // namespace

#define LLMT_CLASSIFIER_FOR(T)                                                                                  \
    void classifier_forward(float* losses, const T* logits, const int32_t* targets, int B, int T_, int V, int Vp, \
                            cudaStream_t stream) {                                                              \
        forward_t(losses, logits, targets, B, T_, V, Vp, stream);                                               \
    }                                                                                                           \
    void classifier_forward_backward(float* losses, T* logits, const int32_t* targets, float dloss_scale, int B, \
                                     int T_, int V, int Vp, cudaStream_t stream) {                              \
        forward_backward_t(losses, logits, targets, dloss_scale, B, T_, V, Vp, stream);                         \
    }                                                                                                           \
    void softmax_forward(T* probs, const T* logits, int B, int T_, int V, int Vp, cudaStream_t stream) {        \
        softmax_t(probs, logits, B, T_, V, Vp, stream);                                                         \
    }
LLMT_CLASSIFIER_FOR(float)
LLMT_CLASSIFIER_FOR(bf16)
#undef LLMT_CLASSIFIER_FOR

namespace {

constexpr int kPredictBlock = 256;

__global__ void classifier_predict_kernel(int32_t* preds, float* loss_sum, const float* logits,
                                          const float* losses, const int32_t* targets, int B, int V, int Vp) {
    __shared__ double partial[kPredictBlock];
    double sum = 0;
    for (int r = threadIdx.x; r < B; r += kPredictBlock) {
        const float* x = logits + static_cast<size_t>(r) * Vp;
        int best = 0;
        for (int c = 1; c < V; c++)
            if (x[best] < x[c]) best = c;  // the first maximum wins, as on the CPU
        preds[r] = best;
        if (targets[r] >= 0) sum += losses[r];
    }
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int half = kPredictBlock / 2; half > 0; half >>= 1) {
        if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        const double total = partial[0];
        const float hi = static_cast<float>(total);
        loss_sum[0] = hi;
        loss_sum[1] = static_cast<float>(total - static_cast<double>(hi));
    }
}

}  // namespace

void classifier_predict(int32_t* preds, float* loss_sum, const float* logits, const float* losses,
                        const int32_t* targets, int B, int V, int Vp, cudaStream_t stream) {
    classifier_predict_kernel<<<1, kPredictBlock, 0, stream>>>(preds, loss_sum, logits, losses, targets, B, V, Vp);
    LLMT_CUDA_CHECK_LAUNCH("classifier_predict_kernel");
}

}  // namespace llmt::kernels::cuda
