// Causal self-attention forward/backward with grouped-query heads (attention.h). The forward's task is one
// (batch, query head); the backward's one (batch, kv head) with its query heads in order, since those heads'
// dk/dv terms add into the same columns. Each task writes only its own out/dqkv columns, so tasks never share
// a written float (and the results do not depend on the thread count).
// Two formulations of the same math:
//  * blocked (FlashAttention-2's loop order): per block of kBq query rows, the scores against keys
//    0..t0+kBq (one kBq x T tile per thread), softmax in the tile, and every product as a single-threaded
//    GEMM on strided views of qkv; used when the GEMM backend can run serially inside the OpenMP region
//    (oneDNN, gemm.h sgemm_serial).
//  * row-wise: one query row at a time with dot/axpy loops (OpenBLAS builds, and the readable
//    reference). Both save lse and recompute probabilities in backward.
// Packed examples (positions given): query t's keys are first_key(t) = t - positions[b,t] .. t. The row-wise
// loops start at first_key; a block's GEMMs start at the smallest first_key of its rows, and each row's
// softmax runs over its own keys (the other columns of its tile row are 0). Without positions first_key is 0
// and every call covers the whole causal row. A sliding window (Mistral) raises each query's
// first key the same way.
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstddef>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/vec.h"

namespace llmt::kernels::cpu {
namespace {

inline float dot(const float* a, const float* b, int n) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

inline void axpy(float* y, float a, const float* x, int n) {
#pragma omp simd
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

// The rows of one query head and of the kv head it reads: q, k, v point at the head's first channel of
// row 0 (views into qkv with row stride C3); out rows have stride C (out, dout) and the lse row is the head's.
// pos: the batch row's positions (T), or null (plain causal attention).
// window: a sliding window of that many keys (the query's own included), or 0.
struct HeadView {
    const float* q;
    const float* k;
    const float* v;
    int64_t C3;
    const int32_t* pos;
    int window = 0;
};

// The first key query t attends: the start of its packed example, or 0; with a window, no earlier than
// t - window + 1 (transformers' sliding-window rule: key j is seen iff t - window < j <= t).
inline int first_key(const HeadView& x, int t) {
    const int lo = x.pos ? t - x.pos[t] : 0;
    return x.window > 0 ? std::max(lo, t - x.window + 1) : lo;
}

// The smallest first key of query rows t0..t0+nq-1 (the first key a block's GEMMs need).
inline int block_first_key(const HeadView& x, int t0, int nq) {
    int k0 = t0 + nq;
    for (int t = t0; t < t0 + nq; t++) k0 = std::min(k0, first_key(x, t));
    return k0;
}

// Query rows t0..t1-1 (keys 0..t each); out and lse (nullable) are indexed from t0. `scores` holds t1 floats.
LLMT_CPU_CLONES
void attention_forward_head(float* out, float* lse, HeadView x, float* scores, int t0, int t1, int C, int HS,
                            float scale) {
    const size_t C3 = static_cast<size_t>(x.C3);
    for (int t = t0; t < t1; t++) {
        const float* q = x.q + t * C3;
        const int lo = first_key(x, t);
        float mx = -std::numeric_limits<float>::infinity();
        for (int j = lo; j <= t; j++) {
            const float s = scale * dot(q, x.k + j * C3, HS);
            scores[j] = s;
            mx = s > mx ? s : mx;
        }
        float sum = 0.0f;
        for (int j = lo; j <= t; j++) {
            const float e = std::exp(scores[j] - mx);
            scores[j] = e;
            sum += e;
        }
        const float inv = 1.0f / sum;
        float* o = out + static_cast<size_t>(t - t0) * C;
        std::memset(o, 0, sizeof(float) * static_cast<size_t>(HS));
        for (int j = lo; j <= t; j++) axpy(o, scores[j] * inv, x.v + j * C3, HS);
        if (lse) lse[t - t0] = mx + std::log(sum);
    }
}

// One query head's share of the backward: dq of the head (=), and its terms of dk, dv (+=, zeroed by the
// caller once per kv head). dq, dk, dv point at the head's (kv head's) channels of dqkv's row 0.
LLMT_CPU_CLONES
void attention_backward_head(float* dq0, float* dk0, float* dv0, const float* dout, HeadView x, const float* out,
                             const float* lse, int T, int C, int HS, float scale) {
    const size_t C3 = static_cast<size_t>(x.C3);
    for (int t = 0; t < T; t++) std::memset(dq0 + t * C3, 0, sizeof(float) * static_cast<size_t>(HS));
    for (int t = 0; t < T; t++) {
        const float* q = x.q + t * C3;
        const float* dy = dout + static_cast<size_t>(t) * C;
        // D_t = sum_j p_tj dp_tj = dout_t . out_t (FlashAttention-2, eq. for dS)
        const float D = dot(dy, out + static_cast<size_t>(t) * C, HS);
        const float l = lse[t];
        float* dq = dq0 + t * C3;
        for (int j = first_key(x, t); j <= t; j++) {
            const float* k = x.k + j * C3;
            const float* v = x.v + j * C3;
            const float p = std::exp(scale * dot(q, k, HS) - l);
            const float dp = dot(dy, v, HS);
            const float ds = p * (dp - D) * scale;
            axpy(dv0 + j * C3, p, dy, HS);  // dv_j += p dout_t
            axpy(dq, ds, k, HS);            // dq_t += scale ds k_j
            axpy(dk0 + j * C3, ds, q, HS);  // dk_j += scale ds q_t
        }
    }
}

constexpr int kBq = 64;  // query rows per block: a 64 x T tile (64 KB at T = 256) per thread

// Blocked forward for one query head. S holds kBq * T floats.
void attention_forward_head_blocked(float* out, float* lse, HeadView x, float* S, int T, int C, int HS,
                                    float scale) {
    const int64_t C3 = x.C3;
    for (int t0 = 0; t0 < T; t0 += kBq) {
        // The tile's columns are keys k0..t0+nq-1 (k0 = 0 without positions).
        const int nq = std::min(kBq, T - t0), k0 = block_first_key(x, t0, nq), nk = t0 + nq - k0;
        // S (nq, nk) = scale * Q[t0:t0+nq] K[k0:t0+nq]^T
        sgemm_serial(false, true, nq, nk, HS, scale, x.q + t0 * C3, C3, x.k + k0 * C3, C3, 0.0f, S, nk);
        for (int i = 0; i < nq; i++) {
            float* row = S + static_cast<size_t>(i) * nk;
            const int a = first_key(x, t0 + i) - k0, n = t0 + i + 1 - k0;  // keys first_key..t0+i
            const float m = vec::row_max(row + a, n - a);
            const float sum = vec::row_exp_sum(row + a, row + a, n - a, m);
            vec::row_scale(row + a, n - a, 1.0f / sum);
            if (a > 0) std::memset(row, 0, sizeof(float) * static_cast<size_t>(a));
            if (n < nk) std::memset(row + n, 0, sizeof(float) * static_cast<size_t>(nk - n));
            lse[t0 + i] = m + std::log(sum);
        }
        // out[t0:t0+nq] = P V[k0:t0+nq]
        sgemm_serial(false, false, nq, HS, nk, 1.0f, S, nk, x.v + k0 * C3, C3, 0.0f,
                     out + static_cast<int64_t>(t0) * C, C);
    }
}

// dS = P * (dP - D) * scale over the row's keys [a, n), 0 elsewhere (up to nk).
LLMT_CPU_CLONES
void softmax_grad_row(float* dp, const float* p, int a, int n, int nk, float D, float scale) {
    for (int j = 0; j < a; j++) dp[j] = 0.0f;
#pragma omp simd
    for (int j = a; j < n; j++) dp[j] = p[j] * (dp[j] - D) * scale;
    for (int j = n; j < nk; j++) dp[j] = 0.0f;
}

// Blocked backward for one query head: dq (=) and its terms of dk, dv (+=, zeroed by the caller once per kv
// head). P and dP hold kBq * T floats each.
void attention_backward_head_blocked(float* dq0, float* dk0, float* dv0, const float* dout, HeadView x,
                                     const float* out, const float* lse, float* P, float* dP, int T, int C, int HS,
                                     float scale) {
    const int64_t C3 = x.C3;
    for (int t0 = 0; t0 < T; t0 += kBq) {
        // The tile's columns are keys k0..t0+nq-1 (k0 = 0 without positions), as in the forward.
        const int nq = std::min(kBq, T - t0), k0 = block_first_key(x, t0, nq), nk = t0 + nq - k0;
        const float* q = x.q + t0 * C3;
        const float* k = x.k + k0 * C3;
        const float* dy = dout + static_cast<int64_t>(t0) * C;
        sgemm_serial(false, true, nq, nk, HS, scale, q, C3, k, C3, 0.0f, P, nk);
        for (int i = 0; i < nq; i++) {  // P = exp(S - lse) over the row's keys, 0 elsewhere
            float* row = P + static_cast<size_t>(i) * nk;
            const int a = first_key(x, t0 + i) - k0, n = t0 + i + 1 - k0;
            vec::row_exp_sum(row + a, row + a, n - a, lse[t0 + i]);
            if (a > 0) std::memset(row, 0, sizeof(float) * static_cast<size_t>(a));
            if (n < nk) std::memset(row + n, 0, sizeof(float) * static_cast<size_t>(nk - n));
        }
        // dP (nq, nk) = dO V^T
        sgemm_serial(false, true, nq, nk, HS, 1.0f, dy, C, x.v + k0 * C3, C3, 0.0f, dP, nk);
        for (int i = 0; i < nq; i++) {
            const float D = dot(dy + static_cast<int64_t>(i) * C, out + static_cast<int64_t>(t0 + i) * C, HS);
            softmax_grad_row(dP + static_cast<size_t>(i) * nk, P + static_cast<size_t>(i) * nk,
                             first_key(x, t0 + i) - k0, t0 + i + 1 - k0, nk, D, scale);
        }
        // dQ = dS K (=);  dK += dS^T Q;  dV += P^T dO (rows k0.. of dK, dV)
        sgemm_serial(false, false, nq, HS, nk, 1.0f, dP, nk, k, C3, 0.0f, dq0 + t0 * C3, C3);
        sgemm_serial(true, false, nk, HS, nq, 1.0f, dP, nk, q, C3, 1.0f, dk0 + k0 * C3, C3);
        sgemm_serial(true, false, nk, HS, nq, 1.0f, P, nk, dy, C, 1.0f, dv0 + k0 * C3, C3);
    }
}

// The blocked path needs a GEMM that stays on the calling thread inside the parallel region.
bool use_blocked() {
    float a = 1.0f, b = 1.0f, c = 0.0f;
    return sgemm_serial(false, false, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c, 1);
}

// Head h of batch row b of a qkv buffer with rows_per_batch rows of C3 = C + 2*KV*HS floats; positions
// (B, rows_per_batch) or null.
HeadView head_view(const float* qkv, int b, int h, int rows_per_batch, int C, int NH, int KV,
                   const int32_t* positions, int window) {
    const int HS = C / NH, g = h / (NH / KV);
    const int64_t C3 = C + 2 * static_cast<int64_t>(KV) * HS;
    const float* row0 = qkv + static_cast<int64_t>(b) * rows_per_batch * C3;
    return {row0 + static_cast<int64_t>(h) * HS, row0 + C + static_cast<int64_t>(g) * HS,
            row0 + C + static_cast<int64_t>(KV + g) * HS, C3,
            positions ? positions + static_cast<int64_t>(b) * rows_per_batch : nullptr, window};
}

}  // namespace

void attention_forward(float* out, float* lse, const float* qkv, int B, int T, int C, int NH, int KV,
                       const int32_t* positions, int window) {
    const int HS = C / NH;
    const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
    const bool blocked = use_blocked();
#pragma omp parallel
    {
        std::vector<float> scratch(static_cast<size_t>(blocked ? kBq : 1) * T);
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                float* o = out + static_cast<size_t>(b) * T * C + h * HS;
                float* l = lse + (static_cast<size_t>(b) * NH + h) * T;
                const HeadView x = head_view(qkv, b, h, T, C, NH, KV, positions, window);
                if (blocked) attention_forward_head_blocked(o, l, x, scratch.data(), T, C, HS, scale);
                else attention_forward_head(o, l, x, scratch.data(), 0, T, C, HS, scale);
            }
        }
    }
}

// One task per (batch, kv head): it zeroes the kv head's dk/dv columns, then adds every query head of its
// group in order (h = g*rep .. g*rep + rep-1), so tasks never share a written float and the sum's order is
// fixed. With KV == NH each task is one head, as in multi-head attention.
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, int B, int T, int C, int NH, int KV, const int32_t* positions,
                        int window) {
    const int HS = C / NH, rep = NH / KV;
    const int64_t C3 = C + 2 * static_cast<int64_t>(KV) * HS;
    const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
    const bool blocked = use_blocked();
#pragma omp parallel
    {
        std::vector<float> scratch(blocked ? 2 * static_cast<size_t>(kBq) * T : 0);
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++) {
            for (int g = 0; g < KV; g++) {
                const size_t bt = static_cast<size_t>(b) * T;
                float* dk = dqkv + bt * C3 + C + static_cast<int64_t>(g) * HS;
                float* dv = dk + static_cast<int64_t>(KV) * HS;
                for (int t = 0; t < T; t++) {
                    std::memset(dk + t * C3, 0, sizeof(float) * static_cast<size_t>(HS));
                    std::memset(dv + t * C3, 0, sizeof(float) * static_cast<size_t>(HS));
                }
                for (int h = g * rep; h < (g + 1) * rep; h++) {
                    float* dq = dqkv + bt * C3 + static_cast<int64_t>(h) * HS;
                    const float* dy = dout + bt * C + h * HS;
                    const float* o = out + bt * C + h * HS;
                    const float* l = lse + (static_cast<size_t>(b) * NH + h) * T;
                    const HeadView x = head_view(qkv, b, h, T, C, NH, KV, positions, window);
                    if (blocked) {
                        attention_backward_head_blocked(dq, dk, dv, dy, x, o, l, scratch.data(),
                                                        scratch.data() + static_cast<size_t>(kBq) * T, T, C, HS,
                                                        scale);
                    } else {
                        attention_backward_head(dq, dk, dv, dy, x, o, l, T, C, HS, scale);
                    }
                }
            }
        }
    }
}

void attention_forward_cached(float* out, const float* qkv, int B, int t0, int Tq, int Tmax, int C, int NH, int KV,
                              int window) {
    const int HS = C / NH;
    const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
    // Decoding: Tq is small (often 1), so the row-wise loop; parallel over (b, h).
#pragma omp parallel
    {
        std::vector<float> scores(static_cast<size_t>(t0 + Tq));
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                attention_forward_head(out + static_cast<size_t>(b) * Tq * C + h * HS, nullptr,
                                       head_view(qkv, b, h, Tmax, C, NH, KV, nullptr, window), scores.data(), t0,
                                       t0 + Tq, C, HS, scale);
            }
        }
    }
}

}  // namespace llmt::kernels::cpu
