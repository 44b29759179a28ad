// Fused classifier on CUDA (cuda/classifier.h).
#include "kernels/cuda/classifier.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/runtime.h"

namespace llmt::kernels::cuda {
namespace {

constexpr int kBlock = 512;

// Online (max, sum of exp(x - max)) over the row's first V columns, combined across the block.
__device__ void row_max_sum(const float* x, int V, float& m_out, float& s_out) {
    __shared__ float sm[32], ss[32];
    float m = -INFINITY, s = 0.0f;
    for (int c = threadIdx.x; c < V; c += blockDim.x) {
        const float v = x[c];
        if (v > m) {
            s = s * expf(m - v) + 1.0f;
            m = v;
        } else {
            s += expf(v - m);
        }
    }
    // Warp combine, then block combine.
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

// mode 0: losses only; 1: losses and dlogits in place; 2: probs.
template <int kMode>
__global__ void classifier_kernel(float* losses, float* dst, const float* logits, const int32_t* targets,
                                  float dloss_scale, int V, int Vp) {
    const long row = blockIdx.x;
    const float* x = logits + row * Vp;
    float* y = dst ? dst + row * Vp : nullptr;
    const int tgt = kMode == 2 ? 0 : targets[row];
    if (kMode != 2 && tgt < 0) {
        if (threadIdx.x == 0) losses[row] = 0.0f;
        if (kMode == 1)
            for (int c = threadIdx.x; c < Vp; c += blockDim.x) y[c] = 0.0f;
        return;
    }
    const float xt = kMode == 2 ? 0.0f : x[tgt];  // read before any thread overwrites the row
    float m, s;
    row_max_sum(x, V, m, s);  // ends with a barrier: every thread has read x[tgt] already
    if (kMode != 2 && threadIdx.x == 0) losses[row] = m + logf(s) - xt;
    if (kMode == 0) return;
    const float k = (kMode == 1 ? dloss_scale : 1.0f) / s;
    for (int c = threadIdx.x; c < Vp; c += blockDim.x) {
        float g = c < V ? expf(x[c] - m) * k : 0.0f;
        if (kMode == 1 && c == tgt) g -= dloss_scale;
        y[c] = g;
    }
}

}  // namespace

void classifier_forward(float* losses, const float* logits, const int32_t* targets, int B, int T, int V, int Vp,
                        cudaStream_t stream) {
    classifier_kernel<0><<<static_cast<unsigned>(static_cast<long>(B) * T), kBlock, 0, stream>>>(
        losses, nullptr, logits, targets, 0.0f, V, Vp);
    LLMT_CUDA_CHECK_LAUNCH("classifier_kernel<forward>");
}

void classifier_forward_backward(float* losses, float* logits, const int32_t* targets, float dloss_scale, int B,
                                 int T, int V, int Vp, cudaStream_t stream) {
    classifier_kernel<1><<<static_cast<unsigned>(static_cast<long>(B) * T), kBlock, 0, stream>>>(
        losses, logits, logits, targets, dloss_scale, V, Vp);
    LLMT_CUDA_CHECK_LAUNCH("classifier_kernel<forward_backward>");
}

void softmax_forward(float* probs, const float* logits, int B, int T, int V, int Vp, cudaStream_t stream) {
    classifier_kernel<2><<<static_cast<unsigned>(static_cast<long>(B) * T), kBlock, 0, stream>>>(
        nullptr, probs, logits, nullptr, 0.0f, V, Vp);
    LLMT_CUDA_CHECK_LAUNCH("classifier_kernel<softmax>");
}

}  // namespace llmt::kernels::cuda
