// Times the LLaMA block's memory-bound kernels (kernels/ops.h, bf16 activations on CUDA) at Llama-3.2-1B's
// shapes, with CUDA events (median of --iters after --warmup), and sets each beside the device's copy
// bandwidth measured in the same process (cudaMemcpyAsync device to device, bytes read + written): these ops
// move every byte once, so that copy is their roofline. The unfused residual add + RMSNorm and LayerNorm
// at the same width are timed too, as references, and the RMSNorm backward src/ replaced (the kernel lab's
// version 1, bench/kernels/rmsnorm_lab.h) beside src's, with the largest difference between their results.
// Bytes counted: every tensor read and written once.
// Usage: llama_ops_gpu_bench [--rows 8192] [--C 2048] [--F 8192] [--NH 32] [--KV 8] [--hs 64] [--iters 50]
//                            [--warmup 10]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/arena.h"
#include "core/bf16.h"
#include "kernels/cuda/runtime.h"
#include "kernels/ops.h"
#include "rmsnorm_lab.h"

namespace {

using llmt::Arena;
using llmt::Device;
using llmt::DType;
using llmt::Tensor;
namespace ops = llmt::kernels;

// One device tensor (its own Arena), filled with normal(0, 1) values (bf16 or f32).
struct Dev {
    Arena a;
    Dev(std::vector<int64_t> shape, DType dt, uint32_t seed) {
        a.add("t", std::move(shape), dt);
        a.allocate(true, Device::kCuda);
        std::mt19937 rng(seed);
        std::normal_distribution<float> d(0.0f, 1.0f);
        const Tensor t = a.view(0);
        if (dt == DType::kBF16) {
            std::vector<uint16_t> h(static_cast<size_t>(t.numel()));
            for (auto& x : h) x = llmt::bf16_from_float(d(rng));
            ops::copy(t, Tensor(h.data(), {t.numel()}, DType::kBF16));
        } else {
            std::vector<float> h(static_cast<size_t>(t.numel()));
            for (auto& x : h) x = d(rng);
            ops::copy(t, Tensor(h.data(), {t.numel()}));
        }
    }
    Tensor t() const { return a.view(0); }
};

template <typename F>
double median_ms(int warmup, int iters, F&& f) {
    cudaStream_t s = llmt::kernels::cuda::stream();
    for (int i = 0; i < warmup; i++) f();
    std::vector<cudaEvent_t> ev(2 * iters);
    for (auto& e : ev) LLMT_CUDA_CHECK(cudaEventCreate(&e));
    for (int i = 0; i < iters; i++) {
        LLMT_CUDA_CHECK(cudaEventRecord(ev[2 * i], s));
        f();
        LLMT_CUDA_CHECK(cudaEventRecord(ev[2 * i + 1], s));
    }
    LLMT_CUDA_CHECK(cudaStreamSynchronize(s));
    std::vector<double> ms(iters);
    for (int i = 0; i < iters; i++) {
        float t = 0;
        LLMT_CUDA_CHECK(cudaEventElapsedTime(&t, ev[2 * i], ev[2 * i + 1]));
        ms[i] = t;
    }
    for (auto& e : ev) cudaEventDestroy(e);
    std::sort(ms.begin(), ms.end());
    return ms[iters / 2];
}

// A device tensor's values as floats (bf16 or f32).
std::vector<float> download(const Tensor& t) {
    std::vector<float> v(static_cast<size_t>(t.numel()));
    if (t.dtype == DType::kBF16) {
        std::vector<uint16_t> h(v.size());
        ops::copy(Tensor(h.data(), {t.numel()}, DType::kBF16), t);
        for (size_t i = 0; i < v.size(); i++) v[i] = llmt::float_from_bf16(h[i]);
    } else {
        ops::copy(Tensor(v.data(), {t.numel()}), t);
    }
    return v;
}

// max |a - b| / max |b|.
double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double d = 0, m = 0;
    for (size_t i = 0; i < a.size(); i++) {
        d = std::max(d, static_cast<double>(std::fabs(a[i] - b[i])));
        m = std::max(m, static_cast<double>(std::fabs(b[i])));
    }
    return m > 0 ? d / m : d;
}

}  // namespace

int main(int argc, char** argv) {
    int rows = 8192, C = 2048, F = 8192, NH = 32, KV = 8, hs = 64, iters = 50, warmup = 10;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        const int v = std::atoi(argv[i + 1]);
        if (a == "--rows") rows = v;
        else if (a == "--C") C = v;
        else if (a == "--F") F = v;
        else if (a == "--NH") NH = v;
        else if (a == "--KV") KV = v;
        else if (a == "--hs") hs = v;
        else if (a == "--iters") iters = std::max(1, v);
        else if (a == "--warmup") warmup = v;
        else {
            std::fprintf(stderr, "unknown argument %s\n", a.c_str());
            return 2;
        }
    }
    try {
        const DType bf = DType::kBF16, f32 = DType::kF32;
        const int64_t R = rows, C3 = static_cast<int64_t>(NH + 2 * KV) * hs;
        Dev x({1, R, C}, bf, 1), y({1, R, C}, bf, 2), out({1, R, C}, bf, 3), h({1, R, C}, bf, 4), w({C}, bf, 5),
            b({C}, bf, 6), rstd({1, R}, f32, 7), mean({1, R}, f32, 8), dw({C}, f32, 9), db({C}, f32, 10),
            dx({1, R, C}, bf, 11), gu({R, 2 * F}, bf, 12), act({R, F}, bf, 13), dgu({R, 2 * F}, bf, 14),
            qkv({1, R, C3}, bf, 15), table({R, hs}, f32, 16);
        ops::rmsnorm_forward(out.t(), rstd.t(), x.t(), w.t(), 1e-5f);
        ops::layernorm_forward(out.t(), mean.t(), rstd.t(), x.t(), w.t(), b.t(), 1e-5f);
        ops::rmsnorm_forward(out.t(), rstd.t(), x.t(), w.t(), 1e-5f);  // rstd of x for the backward
        // The roofline: a device-to-device copy of the largest activation (bytes read + written).
        const size_t copy_bytes = static_cast<size_t>(R) * 2 * F * 2;
        void *src = gu.t().data, *dst = dgu.t().data;
        const double copy_ms = median_ms(warmup, iters, [&] {
            LLMT_CUDA_CHECK(
                cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice, llmt::kernels::cuda::stream()));
        });
        const double copy_gbs = 2.0 * copy_bytes / (copy_ms * 1e-3) / 1e9;
        cudaDeviceProp prop{};
        LLMT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
        std::printf(
            "llama ops bf16 on %s: rows=%d C=%d F=%d heads %d/%d hs=%d, median of %d; copy roofline %.0f GB/s\n",
            prop.name, rows, C, F, NH, KV, hs, iters, copy_gbs);
        std::printf("%-34s %9s %9s %9s\n", "op", "ms", "GB/s", "of copy");
        const double act_b = static_cast<double>(R) * C * 2;  // one (rows, C) bf16 activation
        auto row = [&](const char* name, double bytes, auto&& fn) {
            const double ms = median_ms(warmup, iters, fn);
            const double gbs = bytes / (ms * 1e-3) / 1e9;
            std::printf("%-34s %9.4f %9.0f %8.0f%%\n", name, ms, gbs, 100.0 * gbs / copy_gbs);
        };
        row("rmsnorm_forward", 2 * act_b, [&] { ops::rmsnorm_forward(out.t(), rstd.t(), x.t(), w.t(), 1e-5f); });
        auto p = [](const Tensor& t) { return static_cast<__nv_bfloat16*>(t.data); };
        auto old_backward = [&] {
            llmt::lab::rmsnorm_backward_v1(p(dx.t()), static_cast<float*>(dw.t().data), p(y.t()), p(x.t()), p(w.t()),
                                           static_cast<const float*>(rstd.t().data), 1, rows, C,
                                           llmt::kernels::cuda::stream());
        };
        const bool has_old = llmt::lab::rmsnorm_backward_v1_supports(C, 2, dx.t().data, y.t().data, x.t().data,
                                                                      w.t().data);
        if (has_old) row("rmsnorm_backward v1 (lab, old)", 4 * act_b, old_backward);
        row("rmsnorm_backward (dinp +=)", 4 * act_b,
            [&] { ops::rmsnorm_backward(dx.t(), dw.t(), y.t(), x.t(), w.t(), rstd.t()); });
        // src's row kernel at other rows per step / blocks per SM (lab), and without its dweight kernel.
        if (C % 8 == 0 && C <= 4096) {
            auto lab_rows = [&](const char* name, int rows_per_step, int per_sm, bool with_dweight) {
                row(name, 4 * act_b, [&] {
                    llmt::lab::rmsnorm_backward_rows(p(dx.t()), static_cast<float*>(dw.t().data), p(y.t()), p(x.t()),
                                                     p(w.t()), static_cast<const float*>(rstd.t().data), 1, rows, C,
                                                     rows_per_step, per_sm, with_dweight,
                                                     llmt::kernels::cuda::stream());
                });
            };
            lab_rows("  lab: rows kernel, no dweight sum", 4, 0, false);
            lab_rows("  lab: 1 row/step", 1, 0, true);
            lab_rows("  lab: 2 rows/step", 2, 0, true);
            lab_rows("  lab: 8 rows/step", 8, 0, true);
            lab_rows("  lab: 4 rows/step, 1 block/SM", 4, 1, true);
        }
        row("residual_rmsnorm_forward (fused)", 4 * act_b,
            [&] { ops::residual_rmsnorm_forward(h.t(), out.t(), rstd.t(), x.t(), y.t(), w.t(), 1e-5f); });
        row("residual + rmsnorm (two ops)", 5 * act_b, [&] {
            ops::residual_forward(h.t(), x.t(), y.t());
            ops::rmsnorm_forward(out.t(), rstd.t(), h.t(), w.t(), 1e-5f);
        });
        row("layernorm_forward (reference)", 2 * act_b,
            [&] { ops::layernorm_forward(out.t(), mean.t(), rstd.t(), x.t(), w.t(), b.t(), 1e-5f); });
        const double f_b = static_cast<double>(R) * F * 2;
        row("swiglu_forward", 3 * f_b, [&] { ops::swiglu_forward(act.t(), gu.t()); });
        row("swiglu_backward", 5 * f_b, [&] { ops::swiglu_backward(dgu.t(), act.t(), gu.t()); });
        const double qk_b = static_cast<double>(R) * (NH + KV) * hs * 2;
        row("rope_forward (q, k in place)", 2 * qk_b, [&] { ops::rope_forward(qkv.t(), table.t(), NH, KV); });
        row("rope_backward", 2 * qk_b, [&] { ops::rope_backward(qkv.t(), table.t(), NH, KV); });
        // The backward's results from one state (dinp = dx0, dweight = 0): src's twice, then version 1.
        Dev dx0({1, R, C}, bf, 11);
        auto backward_once = [&](auto&& fn) {
            ops::copy(dx.t(), dx0.t());
            ops::zero(dw.t());
            fn();
            return std::make_pair(download(dx.t()), download(dw.t()));
        };
        auto src_backward = [&] { ops::rmsnorm_backward(dx.t(), dw.t(), y.t(), x.t(), w.t(), rstd.t()); };
        const auto run1 = backward_once(src_backward), run2 = backward_once(src_backward);
        std::printf("rmsnorm_backward twice from one state: dinp %s, dweight %s\n",
                    run1.first == run2.first ? "identical" : "DIFFERENT",
                    run1.second == run2.second ? "identical" : "DIFFERENT");
        if (has_old) {
            const auto v1 = backward_once(old_backward);
            std::printf("rmsnorm_backward vs v1: dinp max rel diff %.2e, dweight max rel diff %.2e\n",
                        max_rel_diff(run1.first, v1.first), max_rel_diff(run1.second, v1.second));
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "llama_ops_gpu_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
