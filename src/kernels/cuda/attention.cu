// Causal attention on CUDA (cuda/attention.h), fp32 on CUDA cores: one warp per query row (forward, dq)
// or key row (dk, dv; with grouped-query heads, a key row of a kv head, summed over its group's query heads). Keys are
// taken 32 at a time, one per lane: each lane forms its score against the row staged in shared memory, the warp
// combines them into the running max/sum, then accumulates the 32 value rows with lane l owning head dims l, l+32, ...
// (coalesced). A first, exact version; the tensor-core bf16 kernel replaces it for speed. Templated on the storage
// type (fp32, or bf16 as the fallback until the tensor-core bf16 kernel is present); arithmetic and the log-sum-exp
// are fp32. Bounded rows (kPacked: packed examples, positions (B,T), and/or a sliding window): query t attends
// keys lo(t) .. t with lo(t) = first_key (key_bounds.cuh: t - positions[b,t], and > t - window), so the forward
// and dq warps start their key loop at lo(t); a dk/dv warp of key j takes the query rows t >= j with
// lo(t) <= j, and stops at the first 32 rows that have none (lo(t) never decreases). With a window that is after
// window rows: O(T W). kPacked false: plain causal attention, no bound code (the same PTX but for the unused
// parameters).
#include "kernels/cuda/attention.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/key_bounds.cuh"
#include "kernels/cuda/runtime.h"

namespace llmt::kernels::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxHs = 128;

template <typename A, typename B>
__device__ __forceinline__ float dot(const A* a, const B* b, int n) {
    float s = 0.0f;
    for (int d = 0; d < n; d++) s += ldf(a[d]) * ldf(b[d]);
    return s;
}

// kGqa: grouped-query heads, query head h reading kv head g = h / (NH / KV) (k at channel C + g*HS, v at
// C + (KV + g)*HS of a qkv row of C3 = C + 2*KV*HS); false: multi-head attention, k at C + h*HS and v at
// 2C + h*HS (the code compiles to the multi-head kernel's PTX, no head mapping).
// DPL head dims per lane (HS <= 32 * DPL). Query row i of (b, h) sits at position t0 + i of a cache of
// Tmax positions; out has Tq rows per batch; lse (may be null) is (B, NH, Tq). kPacked: keys from lo(t) (positions
// only with t0 = 0, Tq = Tmax; the window at any t0).
template <int DPL, typename T, bool kGqa, bool kPacked>
__global__ void attention_forward_kernel(T* out, float* lse, const T* qkv, int B, int t0, int Tq, int Tmax,
                                         int C, int NH, int KV, const int32_t* positions, int window) {
    __shared__ float sq[kWarps][kMaxHs];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const long gw = blockIdx.x * static_cast<long>(kWarps) + warp;  // (b, h, i) with i fastest
    if (gw >= static_cast<long>(B) * NH * Tq) return;
    const int i = static_cast<int>(gw % Tq);
    const int h = static_cast<int>((gw / Tq) % NH);
    const int b = static_cast<int>(gw / (static_cast<long>(Tq) * NH));
    const int HS = C / NH, t = t0 + i;
    const long C3 = kGqa ? C + 2L * KV * HS : 3L * C;
    const float scale = 1.0f / sqrtf(static_cast<float>(HS));
    const T* base = qkv + static_cast<long>(b) * Tmax * C3 + h * HS;
    const T* kb = nullptr;  // GQA: k rows of the kv head; v at + voff
    long voff = 0;
    if constexpr (kGqa) {
        kb = qkv + static_cast<long>(b) * Tmax * C3 + C + (h / (NH / KV)) * HS;
        voff = static_cast<long>(KV) * HS;
    }
    for (int d = lane; d < HS; d += 32) sq[warp][d] = ldf(base[t * C3 + d]) * scale;
    __syncwarp();
    int lo = 0;  // the first key (bounded: clamped into [0, t] for memory safety)
    if constexpr (kPacked)
        lo = min(t, max(0, first_key(positions ? positions + static_cast<long>(b) * Tmax : nullptr, t, window)));

    float m = -INFINITY, l = 0.0f, acc[DPL];
#pragma unroll
    for (int r = 0; r < DPL; r++) acc[r] = 0.0f;
    for (int jb = lo; jb <= t; jb += 32) {
        const int j = jb + lane;
        const bool valid = j <= t;
        const float s = valid ? dot(sq[warp], kGqa ? kb + j * C3 : base + j * C3 + C, HS) : -INFINITY;
        const float m_new = fmaxf(m, warp_max(s));
        const float p = valid ? expf(s - m_new) : 0.0f;
        const float corr = expf(m - m_new);
        l = l * corr + warp_sum(p);
#pragma unroll
        for (int r = 0; r < DPL; r++) acc[r] *= corr;
        const int n = min(32, t - jb + 1);
        for (int jj = 0; jj < n; jj++) {
            const float pj = __shfl_sync(kFullMask, p, jj);
            const T* v = kGqa ? kb + (jb + jj) * C3 + voff : base + (jb + jj) * C3 + 2 * C;
#pragma unroll
            for (int r = 0; r < DPL; r++) {
                const int d = lane + 32 * r;
                if (d < HS) acc[r] += pj * ldf(v[d]);
            }
        }
        m = m_new;
    }
    T* o = out + (static_cast<long>(b) * Tq + i) * C + h * HS;
    const float inv = 1.0f / l;
#pragma unroll
    for (int r = 0; r < DPL; r++) {
        const int d = lane + 32 * r;
        if (d < HS) o[d] = cvt<T>(acc[r] * inv);
    }
    if (lse && lane == 0) lse[(static_cast<long>(b) * NH + h) * Tq + i] = m + logf(l);
}

// dq: one warp per query row t. dS_tj = P_tj (dout_t . v_j - D_t), D_t = dout_t . out_t. kPacked: keys from lo(t).
template <int DPL, typename T, bool kGqa, bool kPacked>
__global__ void attention_backward_dq_kernel(T* dqkv, const T* dout, const T* qkv, const T* out,
                                             const float* lse, int B, int T_, int C, int NH, int KV,
                                             const int32_t* positions, int window) {
    __shared__ float sq[kWarps][kMaxHs];
    __shared__ float sdo[kWarps][kMaxHs];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const long gw = blockIdx.x * static_cast<long>(kWarps) + warp;
    if (gw >= static_cast<long>(B) * NH * T_) return;
    const int t = static_cast<int>(gw % T_);
    const int h = static_cast<int>((gw / T_) % NH);
    const int b = static_cast<int>(gw / (static_cast<long>(T_) * NH));
    const int HS = C / NH;
    const long C3 = kGqa ? C + 2L * KV * HS : 3L * C;
    const float scale = 1.0f / sqrtf(static_cast<float>(HS));
    const T* base = qkv + static_cast<long>(b) * T_ * C3 + h * HS;
    const T* kb = nullptr;  // GQA: k rows of the kv head; v at + voff
    long voff = 0;
    if constexpr (kGqa) {
        kb = qkv + static_cast<long>(b) * T_ * C3 + C + (h / (NH / KV)) * HS;
        voff = static_cast<long>(KV) * HS;
    }
    const long orow = (static_cast<long>(b) * T_ + t) * C + h * HS;
    float Dp = 0.0f;
    for (int d = lane; d < HS; d += 32) {
        sq[warp][d] = ldf(base[t * C3 + d]) * scale;
        sdo[warp][d] = ldf(dout[orow + d]);
        Dp += ldf(dout[orow + d]) * ldf(out[orow + d]);
    }
    const float D = warp_sum(Dp);
    __syncwarp();
    const float L = lse[(static_cast<long>(b) * NH + h) * T_ + t];
    int lo = 0;
    if constexpr (kPacked)
        lo = min(t, max(0, first_key(positions ? positions + static_cast<long>(b) * T_ : nullptr, t, window)));
    float acc[DPL];
#pragma unroll
    for (int r = 0; r < DPL; r++) acc[r] = 0.0f;
    for (int jb = lo; jb <= t; jb += 32) {
        const int j = jb + lane;
        float ds = 0.0f;
        if (j <= t) {
            const float p = expf(dot(sq[warp], kGqa ? kb + j * C3 : base + j * C3 + C, HS) - L);
            ds = p * (dot(sdo[warp], kGqa ? kb + j * C3 + voff : base + j * C3 + 2 * C, HS) - D);
        }
        const int n = min(32, t - jb + 1);
        for (int jj = 0; jj < n; jj++) {
            const float dsj = __shfl_sync(kFullMask, ds, jj);
            const T* k = kGqa ? kb + (jb + jj) * C3 : base + (jb + jj) * C3 + C;
#pragma unroll
            for (int r = 0; r < DPL; r++) {
                const int d = lane + 32 * r;
                if (d < HS) acc[r] += dsj * ldf(k[d]);
            }
        }
    }
    T* dq = dqkv + (static_cast<long>(b) * T_ + t) * C3 + h * HS;
#pragma unroll
    for (int r = 0; r < DPL; r++) {
        const int d = lane + 32 * r;
        if (d < HS) dq[d] = cvt<T>(acc[r] * scale);
    }
}

// The terms of key row j (k, v staged in sk, sv) from the query rows t >= j of one query head (q at base + t*C3,
// out and dout rows at obase, dobase + t*C, lse row lrow), 32 rows at a time (one per lane), added to dk and dv
// (lane owning head dims lane + 32 r): p = exp(q.k scale - lse), dv += p dout, dk += p (dout.v - dout.out) q.
// kPacked: only the rows whose first key (key_bounds.cuh) is at or before j, ending at the first 32 rows without.
template <int DPL, typename T, bool kPacked>
__device__ __forceinline__ void key_row_terms(float (&dk)[DPL], float (&dv)[DPL], const float* sk, const float* sv,
                                              const T* base, const T* obase, const T* dobase, const float* lrow,
                                              const int32_t* positions, int window, int b, int j, int T_, int C,
                                              long C3, int HS, float scale, int lane) {
    for (int tb = j; tb < T_; tb += 32) {
        const int t = tb + lane;
        float p = 0.0f, ds = 0.0f;
        bool in = t < T_;
        if constexpr (kPacked) {
            in = in && first_key(positions ? positions + static_cast<long>(b) * T_ : nullptr, t, window) <= j;
            if (!__any_sync(kFullMask, in)) break;  // every later row's first key is after j too
        }
        if (in) {
            const T* q = base + t * C3;
            const T* go = dobase + static_cast<long>(t) * C;
            p = expf(dot(sk, q, HS) * scale - lrow[t]);
            ds = p * (dot(sv, go, HS) - dot(go, obase + static_cast<long>(t) * C, HS));
        }
        const int n = min(32, T_ - tb);
        for (int tt = 0; tt < n; tt++) {
            const float pt = __shfl_sync(kFullMask, p, tt);
            const float dst = __shfl_sync(kFullMask, ds, tt);
            const T* q = base + (tb + tt) * C3;
            const T* go = dobase + static_cast<long>(tb + tt) * C;
#pragma unroll
            for (int r = 0; r < DPL; r++) {
                const int d = lane + 32 * r;
                if (d < HS) {
                    dv[r] += pt * ldf(go[d]);
                    dk[r] += dst * ldf(q[d]);
                }
            }
        }
    }
}

// dk, dv: one warp per key row j, over query rows t >= j, 32 at a time (one per lane). kPacked: only the rows
// whose example contains j (lo(t) <= j), ending at the first 32 rows without one.
template <int DPL, typename T, bool kPacked>
__global__ void attention_backward_dkv_kernel(T* dqkv, const T* dout, const T* qkv, const T* out,
                                              const float* lse, int B, int T_, int C, int NH,
                                              const int32_t* positions, int window) {
    __shared__ float sk[kWarps][kMaxHs];
    __shared__ float sv[kWarps][kMaxHs];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const long gw = blockIdx.x * static_cast<long>(kWarps) + warp;
    if (gw >= static_cast<long>(B) * NH * T_) return;
    const int j = static_cast<int>(gw % T_);
    const int h = static_cast<int>((gw / T_) % NH);
    const int b = static_cast<int>(gw / (static_cast<long>(T_) * NH));
    const int HS = C / NH;
    const long C3 = 3L * C;
    const float scale = 1.0f / sqrtf(static_cast<float>(HS));
    const T* base = qkv + static_cast<long>(b) * T_ * C3 + h * HS;
    const T* obase = out + static_cast<long>(b) * T_ * C + h * HS;
    const T* dobase = dout + static_cast<long>(b) * T_ * C + h * HS;
    const float* lrow = lse + (static_cast<long>(b) * NH + h) * T_;
    for (int d = lane; d < HS; d += 32) {
        sk[warp][d] = ldf(base[j * C3 + C + d]);
        sv[warp][d] = ldf(base[j * C3 + 2 * C + d]);
    }
    __syncwarp();
    float dk[DPL], dv[DPL];
#pragma unroll
    for (int r = 0; r < DPL; r++) dk[r] = dv[r] = 0.0f;
    key_row_terms<DPL, T, kPacked>(dk, dv, sk[warp], sv[warp], base, obase, dobase, lrow, positions, window, b, j,
                                   T_, C, C3, HS, scale, lane);
    T* dkp = dqkv + (static_cast<long>(b) * T_ + j) * C3 + C + h * HS;
#pragma unroll
    for (int r = 0; r < DPL; r++) {
        const int d = lane + 32 * r;
        if (d < HS) {
            dkp[d] = cvt<T>(dk[r] * scale);
            dkp[C + d] = cvt<T>(dv[r]);
        }
    }
}

// Grouped-query dk, dv: one warp per key row j of kv head g, over the query heads of its group in order and, for each,
// the query rows t >= j, 32 at a time (one per lane); the group's sum stays in registers (no atomics).
template <int DPL, typename T, bool kPacked>
__global__ void attention_backward_dkv_gqa_kernel(T* dqkv, const T* dout, const T* qkv, const T* out,
                                              const float* lse, int B, int T_, int C, int NH, int KV,
                                              const int32_t* positions, int window) {
    __shared__ float sk[kWarps][kMaxHs];
    __shared__ float sv[kWarps][kMaxHs];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const long gw = blockIdx.x * static_cast<long>(kWarps) + warp;
    if (gw >= static_cast<long>(B) * KV * T_) return;
    const int j = static_cast<int>(gw % T_);
    const int g = static_cast<int>((gw / T_) % KV);
    const int b = static_cast<int>(gw / (static_cast<long>(T_) * KV));
    const int HS = C / NH, rep = NH / KV;
    const long C3 = C + 2L * KV * HS, voff = static_cast<long>(KV) * HS;
    const float scale = 1.0f / sqrtf(static_cast<float>(HS));
    const T* kb = qkv + static_cast<long>(b) * T_ * C3 + C + g * HS;
    for (int d = lane; d < HS; d += 32) {
        sk[warp][d] = ldf(kb[j * C3 + d]);
        sv[warp][d] = ldf(kb[j * C3 + voff + d]);
    }
    __syncwarp();
    float dk[DPL], dv[DPL];
#pragma unroll
    for (int r = 0; r < DPL; r++) dk[r] = dv[r] = 0.0f;
    for (int h = g * rep; h < (g + 1) * rep; h++) {
        const T* base = qkv + static_cast<long>(b) * T_ * C3 + h * HS;
        const T* obase = out + static_cast<long>(b) * T_ * C + h * HS;
        const T* dobase = dout + static_cast<long>(b) * T_ * C + h * HS;
        const float* lrow = lse + (static_cast<long>(b) * NH + h) * T_;
        key_row_terms<DPL, T, kPacked>(dk, dv, sk[warp], sv[warp], base, obase, dobase, lrow, positions, window, b,
                                       j, T_, C, C3, HS, scale, lane);
    }
    T* dkp = dqkv + (static_cast<long>(b) * T_ + j) * C3 + C + g * HS;
#pragma unroll
    for (int r = 0; r < DPL; r++) {
        const int d = lane + 32 * r;
        if (d < HS) {
            dkp[d] = cvt<T>(dk[r] * scale);
            dkp[voff + d] = cvt<T>(dv[r]);
        }
    }
}

unsigned grid_rows(long rows) { return static_cast<unsigned>((rows + kWarps - 1) / kWarps); }

// Head dims per lane for HS: 1 (HS <= 32), 2 (<= 64) or 4 (<= 128); larger heads are refused.
int dims_per_lane(int C, int NH) {
    const int HS = C / NH;
    if (HS > kMaxHs) throw_cuda_error("attention: head size C/NH > 128 is not supported by the CUDA kernels",
                                      cudaErrorInvalidValue, __FILE__, __LINE__);
    return HS <= 32 ? 1 : HS <= 64 ? 2 : 4;
}

template <int DPL, typename T, bool kPacked>
void forward_launch(T* out, float* lse, const T* qkv, int B, int t0, int Tq, int Tmax, int C, int NH, int KV,
                    const int32_t* positions, int window, cudaStream_t stream) {
    const unsigned grid = grid_rows(static_cast<long>(B) * NH * Tq);
    if (KV == NH)
        attention_forward_kernel<DPL, T, false, kPacked>
            <<<grid, kWarps * 32, 0, stream>>>(out, lse, qkv, B, t0, Tq, Tmax, C, NH, KV, positions, window);
    else
        attention_forward_kernel<DPL, T, true, kPacked>
            <<<grid, kWarps * 32, 0, stream>>>(out, lse, qkv, B, t0, Tq, Tmax, C, NH, KV, positions, window);
    LLMT_CUDA_CHECK_LAUNCH("attention_forward_kernel");
}

template <int DPL, typename T>
void forward_dpl(T* out, float* lse, const T* qkv, int B, int t0, int Tq, int Tmax, int C, int NH, int KV,
                 const int32_t* positions, int window, cudaStream_t stream) {
    if (positions || window > 0)
        forward_launch<DPL, T, true>(out, lse, qkv, B, t0, Tq, Tmax, C, NH, KV, positions, window, stream);
    else forward_launch<DPL, T, false>(out, lse, qkv, B, t0, Tq, Tmax, C, NH, KV, positions, 0, stream);
}

// positions (B,T) or null; only with t0 = 0 and Tq = Tmax (training, not the KV cache). window > 0 or 0 (none).
template <typename T>
void forward_any(T* out, float* lse, const T* qkv, int B, int t0, int Tq, int Tmax, int C, int NH, int KV,
                 const int32_t* positions, int window, cudaStream_t stream) {
    switch (dims_per_lane(C, NH)) {
        case 1: forward_dpl<1>(out, lse, qkv, B, t0, Tq, Tmax, C, NH, KV, positions, window, stream); break;
        case 2: forward_dpl<2>(out, lse, qkv, B, t0, Tq, Tmax, C, NH, KV, positions, window, stream); break;
        default: forward_dpl<4>(out, lse, qkv, B, t0, Tq, Tmax, C, NH, KV, positions, window, stream); break;
    }
}

template <int DPL, typename T, bool kPacked>
void backward_launch(T* dqkv, const T* dout, const T* qkv, const T* out, const float* lse, int B, int T_, int C,
                     int NH, int KV, const int32_t* positions, int window, cudaStream_t stream) {
    const unsigned grid = grid_rows(static_cast<long>(B) * NH * T_);
    if (KV == NH) {  // multi-head attention: the kGqa false kernels, no head mapping
        attention_backward_dq_kernel<DPL, T, false, kPacked>
            <<<grid, kWarps * 32, 0, stream>>>(dqkv, dout, qkv, out, lse, B, T_, C, NH, KV, positions, window);
        LLMT_CUDA_CHECK_LAUNCH("attention_backward_dq_kernel");
        attention_backward_dkv_kernel<DPL, T, kPacked>
            <<<grid, kWarps * 32, 0, stream>>>(dqkv, dout, qkv, out, lse, B, T_, C, NH, positions, window);
        LLMT_CUDA_CHECK_LAUNCH("attention_backward_dkv_kernel");
        return;
    }
    attention_backward_dq_kernel<DPL, T, true, kPacked>
        <<<grid, kWarps * 32, 0, stream>>>(dqkv, dout, qkv, out, lse, B, T_, C, NH, KV, positions, window);
    LLMT_CUDA_CHECK_LAUNCH("attention_backward_dq_kernel");
    attention_backward_dkv_gqa_kernel<DPL, T, kPacked><<<grid_rows(static_cast<long>(B) * KV * T_), kWarps * 32, 0,
                                                         stream>>>(dqkv, dout, qkv, out, lse, B, T_, C, NH, KV,
                                                                   positions, window);
    LLMT_CUDA_CHECK_LAUNCH("attention_backward_dkv_gqa_kernel");
}

template <int DPL, typename T>
void backward_dpl(T* dqkv, const T* dout, const T* qkv, const T* out, const float* lse, int B, int T_, int C, int NH,
                  int KV, const int32_t* positions, int window, cudaStream_t stream) {
    if (positions || window > 0)
        backward_launch<DPL, T, true>(dqkv, dout, qkv, out, lse, B, T_, C, NH, KV, positions, window, stream);
    else backward_launch<DPL, T, false>(dqkv, dout, qkv, out, lse, B, T_, C, NH, KV, positions, 0, stream);
}

template <typename T>
void backward_any(T* dqkv, const T* dout, const T* qkv, const T* out, const float* lse, int B, int T_, int C, int NH,
                  int KV, const int32_t* positions, int window, cudaStream_t stream) {
    switch (dims_per_lane(C, NH)) {
        case 1: backward_dpl<1>(dqkv, dout, qkv, out, lse, B, T_, C, NH, KV, positions, window, stream); break;
        case 2: backward_dpl<2>(dqkv, dout, qkv, out, lse, B, T_, C, NH, KV, positions, window, stream); break;
        default: backward_dpl<4>(dqkv, dout, qkv, out, lse, B, T_, C, NH, KV, positions, window, stream); break;
    }
}

}  // namespace

void attention_forward(float* out, float* lse, const float* qkv, int B, int T, int C, int NH, int KV,
                       cudaStream_t stream, const int32_t* positions, int window) {
    forward_any(out, lse, qkv, B, 0, T, T, C, NH, KV, positions, window, stream);
}
void attention_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH, int KV,
                       cudaStream_t stream, const int32_t* positions, int window) {
    forward_any(out, lse, qkv, B, 0, T, T, C, NH, KV, positions, window, stream);
}

void attention_forward_cached(float* out, const float* qkv, int B, int t0, int Tq, int Tmax, int C, int NH, int KV,
                              cudaStream_t stream, int window) {
    forward_any(out, static_cast<float*>(nullptr), qkv, B, t0, Tq, Tmax, C, NH, KV, nullptr, window, stream);
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out, const float* lse,
                        int B, int T, int C, int NH, int KV, cudaStream_t stream, const int32_t* positions,
                        int window) {
    backward_any(dqkv, dout, qkv, out, lse, B, T, C, NH, KV, positions, window, stream);
}
void attention_backward(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* out, const float* lse, int B,
                        int T, int C, int NH, int KV, cudaStream_t stream, const int32_t* positions, int window) {
    backward_any(dqkv, dout, qkv, out, lse, B, T, C, NH, KV, positions, window, stream);
}

}  // namespace llmt::kernels::cuda
