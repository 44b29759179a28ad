// AdamW and sum of squares on CUDA (cuda/optim.h).
#include <cmath>
#include <cstdint>

#include "core/knobs.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/optim.h"
#include "kernels/cuda/runtime.h"

namespace llmt::kernels::cuda {
namespace {

constexpr int kBlock = 256;

// params_lp (may be null): the bf16 compute copy of params, refreshed in the same pass.
__global__ void adamw_kernel(float* params, bf16* params_lp, float* m, float* v, const float* grads, long n,
                             float decay, float b1, float b2, float step_size, float inv_sqrt_bc2, float eps,
                             float gs) {
    for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<long>(gridDim.x) * blockDim.x) {
        const float g = grads[i] * gs;
        const float mi = b1 * m[i] + (1.0f - b1) * g;
        const float vi = b2 * v[i] + (1.0f - b2) * g * g;
        m[i] = mi;
        v[i] = vi;
        const float p = params[i] * decay - step_size * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
        params[i] = p;
        if (params_lp) params_lp[i] = __float2bfloat16_rn(p);
    }
}

// The same update, 4 elements per thread from 16-byte loads (params_lp: one 8-byte store). Needs n % 4 == 0
// and 16-byte aligned fp32 arrays (8-byte aligned params_lp); the scalar kernel loaded 4 bytes per array
// per thread and reached ~2.3 TB/s on an H100 (docs/benchmarks.md).
__global__ void adamw_x4_kernel(float4* params, uint2* params_lp, float4* m, float4* v, const float4* grads, long n4,
                                float decay, float b1, float b2, float step_size, float inv_sqrt_bc2, float eps,
                                float gs) {
    for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n4;
         i += static_cast<long>(gridDim.x) * blockDim.x) {
        const float4 g4 = grads[i], p4 = params[i];
        float4 m4 = m[i], v4 = v[i];
        float g[4] = {g4.x, g4.y, g4.z, g4.w}, pp[4] = {p4.x, p4.y, p4.z, p4.w};
        float mm[4] = {m4.x, m4.y, m4.z, m4.w}, vv[4] = {v4.x, v4.y, v4.z, v4.w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const float gk = g[k] * gs;
            mm[k] = b1 * mm[k] + (1.0f - b1) * gk;
            vv[k] = b2 * vv[k] + (1.0f - b2) * gk * gk;
            pp[k] = pp[k] * decay - step_size * mm[k] / (sqrtf(vv[k]) * inv_sqrt_bc2 + eps);
        }
        m[i] = make_float4(mm[0], mm[1], mm[2], mm[3]);
        v[i] = make_float4(vv[0], vv[1], vv[2], vv[3]);
        params[i] = make_float4(pp[0], pp[1], pp[2], pp[3]);
        if (params_lp) {
            __nv_bfloat162 lo = __floats2bfloat162_rn(pp[0], pp[1]), hi = __floats2bfloat162_rn(pp[2], pp[3]);
            uint2 o;
            o.x = *reinterpret_cast<uint32_t*>(&lo);
            o.y = *reinterpret_cast<uint32_t*>(&hi);
            params_lp[i] = o;
        }
    }
}

bool aligned(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

// Up to kMaxRuns runs per launch, passed by value (kernel parameters: ~2.2 KB of the 4 KB allowed).
constexpr int kMaxRuns = 128;
struct RunTable {
    long long begin[kMaxRuns], end[kMaxRuns];
    float decay[kMaxRuns];  // 1 - lr * weight_decay, or 1 for runs without decay
    int n;
};
constexpr int kRunChunk = 4096;  // elements of 4 per block: each block walks one contiguous range

// The AdamW step of one element (also the arithmetic of adamw_x4_kernel).
__device__ __forceinline__ void adamw_one(float& p, float& mi, float& vi, float g, float decay, float b1, float b2,
                                          float step_size, float inv_sqrt_bc2, float eps) {
    mi = b1 * mi + (1.0f - b1) * g;
    vi = b2 * vi + (1.0f - b2) * g * g;
    p = p * decay - step_size * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
}

// AdamW over the table's runs in one launch: block b takes the 4-element groups [b*kRunChunk,
// (b+1)*kRunChunk) counted from runs begin[0] (16-byte aligned arrays, begin[0] % 4 == 0); each thread finds
// its first group's run by binary search and then only moves forward. A group inside one run is updated
// with 16-byte accesses; one that straddles a boundary or a gap element by element.
__global__ void adamw_runs_kernel(float* params, bf16* params_lp, float* m, float* v, const float* grads,
                                  const __grid_constant__ RunTable t, float b1, float b2, float step_size,
                                  float inv_sqrt_bc2, float eps, float gs) {
    const long long first = t.begin[0], last = t.end[t.n - 1];
    const long long g0 = first / 4 + static_cast<long long>(blockIdx.x) * kRunChunk;
    int r = -1;
    for (int k = threadIdx.x; k < kRunChunk; k += blockDim.x) {
        const long long e = (g0 + k) * 4;
        if (e >= last) break;
        r = run_at(t.begin, t.n, e, r);
        if (e >= t.begin[r] && e + 4 <= t.end[r]) {
            const long long i = e / 4;
            const float4 g4 = reinterpret_cast<const float4*>(grads)[i];
            float4 p4 = reinterpret_cast<float4*>(params)[i], m4 = reinterpret_cast<float4*>(m)[i],
                   v4 = reinterpret_cast<float4*>(v)[i];
            const float d = t.decay[r];
            adamw_one(p4.x, m4.x, v4.x, g4.x * gs, d, b1, b2, step_size, inv_sqrt_bc2, eps);
            adamw_one(p4.y, m4.y, v4.y, g4.y * gs, d, b1, b2, step_size, inv_sqrt_bc2, eps);
            adamw_one(p4.z, m4.z, v4.z, g4.z * gs, d, b1, b2, step_size, inv_sqrt_bc2, eps);
            adamw_one(p4.w, m4.w, v4.w, g4.w * gs, d, b1, b2, step_size, inv_sqrt_bc2, eps);
            reinterpret_cast<float4*>(m)[i] = m4;
            reinterpret_cast<float4*>(v)[i] = v4;
            reinterpret_cast<float4*>(params)[i] = p4;
            if (params_lp) {
                __nv_bfloat162 lo = __floats2bfloat162_rn(p4.x, p4.y), hi = __floats2bfloat162_rn(p4.z, p4.w);
                uint2 o;
                o.x = *reinterpret_cast<uint32_t*>(&lo);
                o.y = *reinterpret_cast<uint32_t*>(&hi);
                reinterpret_cast<uint2*>(params_lp)[i] = o;
            }
            continue;
        }
        for (long long j = e; j < e + 4 && j < last; j++) {  // a boundary or a gap: element by element
            int q = r;
            while (q + 1 < t.n && t.begin[q + 1] <= j) q++;
            if (j < t.begin[q] || j >= t.end[q]) continue;  // between runs
            float p = params[j], mi = m[j], vi = v[j];
            adamw_one(p, mi, vi, grads[j] * gs, t.decay[q], b1, b2, step_size, inv_sqrt_bc2, eps);
            m[j] = mi;
            v[j] = vi;
            params[j] = p;
            if (params_lp) params_lp[j] = __float2bfloat16_rn(p);
        }
    }
}

__global__ void sum_squares_kernel(double* out, const float* x, long n) {
    __shared__ double scratch[32];
    double s = 0.0;
    for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<long>(gridDim.x) * blockDim.x) {
        const double v = x[i];
        s += v * v;
    }
    s = block_sum(s, scratch);
    if (threadIdx.x == 0) atomicAdd(out, s);
}

}  // namespace

void adamw_update(float* params, __nv_bfloat16* params_lp, float* m, float* v, const float* grads, size_t N,
                  const AdamWParams& hp, cudaStream_t stream) {
    const auto [step_size, inv_sqrt_bc2] = adamw_bias_correction(hp);
    const float decay = 1.0f - hp.lr * hp.weight_decay;
    const long n = static_cast<long>(N);
    if (N % 4 == 0 && aligned(params, 16) && aligned(m, 16) && aligned(v, 16) && aligned(grads, 16) &&
        aligned(params_lp, 8)) {
        const long n4 = n / 4;
        adamw_x4_kernel<<<grid_for(n4, kBlock), kBlock, 0, stream>>>(
            reinterpret_cast<float4*>(params), reinterpret_cast<uint2*>(params_lp), reinterpret_cast<float4*>(m),
            reinterpret_cast<float4*>(v), reinterpret_cast<const float4*>(grads), n4, decay, hp.beta1, hp.beta2,
            step_size, inv_sqrt_bc2, hp.eps, hp.grad_scale);
        LLMT_CUDA_CHECK_LAUNCH("adamw_x4_kernel");
        return;
    }
    adamw_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(params, params_lp, m, v, grads, n, decay, hp.beta1,
                                                             hp.beta2, step_size, inv_sqrt_bc2, hp.eps, hp.grad_scale);
    LLMT_CUDA_CHECK_LAUNCH("adamw_kernel");
}

void adamw_update_runs(float* params, __nv_bfloat16* params_lp, float* m, float* v, const float* grads,
                       const AdamWRun* runs, int n_runs, const AdamWParams& hp, cudaStream_t stream) {
    if (n_runs <= 0) return;
    // LLMTRAIN_ADAMW_RUNS=0: one launch per run (the path misaligned arenas take anyway).
    const bool ok = knob_on(Knob::kAdamwRuns) && aligned(params, 16) && aligned(m, 16) && aligned(v, 16) &&
                    aligned(grads, 16) && aligned(params_lp, 8);
    auto one_run = [&](const AdamWRun& run) {  // the single-run kernels
        AdamWParams h = hp;
        if (!run.decay) h.weight_decay = 0.0f;
        adamw_update(params + run.begin, params_lp ? params_lp + run.begin : nullptr, m + run.begin, v + run.begin,
                     grads + run.begin, static_cast<size_t>(run.end - run.begin), h, stream);
    };
    if (!ok) {
        for (int r = 0; r < n_runs; r++) one_run(runs[r]);
        return;
    }
    const auto [step_size, inv_sqrt_bc2] = adamw_bias_correction(hp);
    int r0 = 0;
    while (r0 < n_runs) {
        if (runs[r0].begin % 4 != 0) {  // a table must start on a 4-element group: this run alone
            one_run(runs[r0++]);
            continue;
        }
        RunTable t{};
        t.n = n_runs - r0 < kMaxRuns ? n_runs - r0 : kMaxRuns;
        for (int i = 0; i < t.n; i++) {
            t.begin[i] = runs[r0 + i].begin;
            t.end[i] = runs[r0 + i].end;
            t.decay[i] = runs[r0 + i].decay ? 1.0f - hp.lr * hp.weight_decay : 1.0f;
        }
        const long long groups = (t.end[t.n - 1] - t.begin[0] + 3) / 4;
        const unsigned grid = static_cast<unsigned>((groups + kRunChunk - 1) / kRunChunk);
        adamw_runs_kernel<<<grid, kBlock, 0, stream>>>(params, params_lp, m, v, grads, t, hp.beta1, hp.beta2,
                                                       step_size, inv_sqrt_bc2, hp.eps, hp.grad_scale);
        LLMT_CUDA_CHECK_LAUNCH("adamw_runs_kernel");
        r0 += t.n;
    }
}

double sum_squares(const float* x, size_t N, cudaStream_t stream) {
    // One 8-byte accumulator per process, reused by every call (calls are serialised on the stream).
    static double* acc = [] {
        double* p = nullptr;
        LLMT_CUDA_CHECK(cudaMalloc(&p, sizeof(double)));
        return p;
    }();
    LLMT_CUDA_CHECK(cudaMemsetAsync(acc, 0, sizeof(double), stream));
    const long n = static_cast<long>(N);
    sum_squares_kernel<<<grid_for(n, kBlock, 1024), kBlock, 0, stream>>>(acc, x, n);
    LLMT_CUDA_CHECK_LAUNCH("sum_squares_kernel");
    double host = 0.0;
    LLMT_CUDA_CHECK(cudaMemcpyAsync(&host, acc, sizeof(double), cudaMemcpyDeviceToHost, stream));
    LLMT_CUDA_CHECK(cudaStreamSynchronize(stream));
    return host;
}

}  // namespace llmt::kernels::cuda
