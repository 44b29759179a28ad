// SGD with momentum on CUDA (cuda/sgd.h): one grid over all runs of the arena, element by element (the
// update moves 4 (no momentum: 3) fp32 words per element and is bound by memory bandwidth).
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/sgd.h"

namespace llmt::kernels::cuda {
namespace {

constexpr int kBlock = 256;
constexpr int kMaxRuns = 128;  // runs per launch, passed by value (~2.6 KB of the 4 KB of kernel parameters)
constexpr int kChunk = 8192;   // elements per block: each block walks one contiguous range

struct SgdRunTable {
    long long begin[kMaxRuns], end[kMaxRuns];
    float wd[kMaxRuns];  // hp.weight_decay, or 0 for runs without decay
    int n;
};

struct SgdScalars {
    float lr, momentum, keep, gs;  // keep = 1 - dampening
    bool first, nesterov;
};

// The update of one element: the arithmetic of cpu/sgd.cpp, operation for operation.
__device__ __forceinline__ void sgd_one(float& p, float* buf_i, float g, float wd, const SgdScalars& s) {
    float d = g * s.gs + wd * p;
    if (buf_i) {
        const float b = s.first ? d : s.momentum * *buf_i + s.keep * d;
        *buf_i = b;
        d = s.nesterov ? d + s.momentum * b : b;
    }
    p = p - s.lr * d;
}

// Block b updates elements [first + b*kChunk, first + (b+1)*kChunk) (first = the table's first run begin);
// each thread finds its first element's run by binary search and then only moves forward.
__global__ void sgd_runs_kernel(float* params, bf16* params_lp, float* buf, const float* grads,
                                const __grid_constant__ SgdRunTable t, const SgdScalars s) {
    const long long first = t.begin[0], last = t.end[t.n - 1];
    const long long e0 = first + static_cast<long long>(blockIdx.x) * kChunk;
    int r = -1;
    for (int k = threadIdx.x; k < kChunk; k += blockDim.x) {
        const long long e = e0 + k;
        if (e >= last) break;
        r = run_at(t.begin, t.n, e, r);
        if (e >= t.end[r]) continue;  // a gap between runs
        float p = params[e];
        sgd_one(p, buf ? buf + e : nullptr, grads[e], t.wd[r], s);
        params[e] = p;
        if (params_lp) params_lp[e] = __float2bfloat16_rn(p);
    }
}

}  // namespace

void sgd_update_runs(float* params, __nv_bfloat16* params_lp, float* buf, const float* grads, const AdamWRun* runs,
                     int n_runs, const SgdParams& hp, cudaStream_t stream) {
    if (n_runs <= 0) return;
    SgdScalars s{hp.lr, hp.momentum, static_cast<float>(1.0 - static_cast<double>(hp.dampening)), hp.grad_scale,
                 hp.first_step, hp.nesterov};
    if (hp.momentum == 0.0f) buf = nullptr;  // plain SGD (cpu/sgd.h)
    for (int r0 = 0; r0 < n_runs;) {
        SgdRunTable t{};
        t.n = n_runs - r0 < kMaxRuns ? n_runs - r0 : kMaxRuns;
        for (int i = 0; i < t.n; i++) {
            t.begin[i] = runs[r0 + i].begin;
            t.end[i] = runs[r0 + i].end;
            t.wd[i] = runs[r0 + i].decay ? hp.weight_decay : 0.0f;
        }
        const long long elems = t.end[t.n - 1] - t.begin[0];
        const unsigned grid = static_cast<unsigned>((elems + kChunk - 1) / kChunk);
        sgd_runs_kernel<<<grid, kBlock, 0, stream>>>(params, params_lp, buf, grads, t, s);
        LLMT_CUDA_CHECK_LAUNCH("sgd_runs_kernel");
        r0 += t.n;
    }
}

}  // namespace llmt::kernels::cuda
