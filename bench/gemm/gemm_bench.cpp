// Times cpu::sgemm_with on both backends (OpenBLAS, oneDNN) for the GEMMs of one GPT-2 training step
// (forward out = inp @ W^T, backward dinp = dout @ W and dW += dout^T @ inp) at a given config, plus a
// 2048^3 product; prints median GFLOP/s per backend and the oneDNN/OpenBLAS ratio, and the whole
// step's GEMM time per backend. Also checks the two backends agree on every shape.
// Usage: gemm_bench [--bt 2048] [--c 256] [--vp 50304] [--reps 5]
#include <omp.h>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/gemm_probe.h"
#include "train/cpu_precision.h"

using llmt::kernels::cpu::GemmBackend;
using llmt::kernels::cpu::sgemm_with;

namespace {

struct Shape {
    std::string name;
    bool ta, tb;
    int64_t M, N, K;
    int per_step;  // how many times one training step runs it (layers)
};

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CPU seconds this process got (all threads): on a shared machine, GFLOP per CPU-second is the steadier
// figure (with 1 thread it is the per-core throughput whatever the load).
double cpu_s() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    int64_t BT = 2048, C = 256, Vp = 50304;
    int L = 4, reps = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--bt")) BT = std::stoll(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--c")) C = std::stoll(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--vp")) Vp = std::stoll(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--layers")) L = std::stoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--reps")) reps = std::stoi(argv[i + 1]);
        else {
            std::fprintf(stderr, "usage: %s [--bt N] [--c N] [--vp N] [--layers N] [--reps N]\n", argv[0]);
            return 2;
        }
    }
    std::vector<Shape> shapes;
    auto linear = [&](const std::string& name, int64_t OC, int64_t IC, int n) {
        shapes.push_back({name + " fwd", false, true, BT, OC, IC, n});        // inp @ W^T
        shapes.push_back({name + " bwd dinp", false, false, BT, IC, OC, n});  // dout @ W
        shapes.push_back({name + " bwd dW", true, false, OC, IC, BT, n});     // dout^T @ inp
    };
    linear("qkv", 3 * C, C, L);
    linear("attproj", C, C, L);
    linear("fc", 4 * C, C, L);
    linear("fcproj", C, 4 * C, L);
    linear("lm_head", Vp, C, 1);
    shapes.push_back({"square 2048^3", false, false, 2048, 2048, 2048, 0});

    std::printf("gemm_bench: BT=%lld C=%lld Vp=%lld layers=%d, %d threads, cpu: %s\n",
                static_cast<long long>(BT), static_cast<long long>(C), static_cast<long long>(Vp), L,
                omp_get_max_threads(), llmt::cpu_features().describe().c_str());
    std::printf("GFLOP/s (wall, median of %d) and [GFLOP per CPU-second]\n", reps);
    std::printf("bf16: %s\n", llmt::kernels::cpu::gemm_bf16_describe().c_str());
    std::printf("%-20s %6s %6s %6s %18s %18s %7s %9s %18s %9s\n", "shape", "M", "N", "K", "openblas", "onednn",
                "ratio", "maxdiff", "bf16 (native)", "bf16/f32");
    double step_s[3] = {0, 0, 0};
    const bool bf16 = llmt::kernels::cpu::gemm_bf16_native();
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    for (const Shape& s : shapes) {
        const int64_t rowsA = s.ta ? s.K : s.M, colsA = s.ta ? s.M : s.K;
        const int64_t rowsB = s.tb ? s.N : s.K, colsB = s.tb ? s.K : s.N;
        std::vector<float> A(static_cast<size_t>(rowsA * colsA)), B(static_cast<size_t>(rowsB * colsB));
        for (auto& x : A) x = d(rng);
        for (auto& x : B) x = d(rng);
        std::vector<float> Cm[3];
        double gflops[3] = {0, 0, 0}, gflops_cpu[3] = {0, 0, 0};
        for (int be = 0; be < 3; be++) {  // OpenBLAS, oneDNN fp32, bf16 GEMM with fp32 accumulation (gemm_bf16.h)
            const GemmBackend backend = be == 0 ? GemmBackend::kOpenBlas : GemmBackend::kOneDnn;
            if (be == 2 ? !bf16 : !llmt::kernels::cpu::gemm_backend_available(backend)) {
                gflops[be] = 0;
                continue;
            }
            Cm[be].assign(static_cast<size_t>(s.M * s.N), 0.0f);
            std::vector<double> t, tc;
            for (int r = 0; r < reps + 1; r++) {  // first run warms up (page faults, JIT, thread pool)
                const double t0 = now_s(), c0 = cpu_s();
                if (be == 2)  // includes rounding both operands to bf16, as training pays it
                    llmt::kernels::cpu::gemm_bf16(s.ta, s.tb, s.M, s.N, s.K, A.data(), colsA, B.data(), colsB, 0.0f,
                                                  Cm[be].data(), s.N);
                else
                    sgemm_with(backend, s.ta, s.tb, s.M, s.N, s.K, 1.0f, A.data(), colsA, B.data(), colsB, 0.0f,
                               Cm[be].data(), s.N);
                if (r > 0) {
                    t.push_back(now_s() - t0);
                    tc.push_back(cpu_s() - c0);
                }
            }
            const double sec = median(t);
            gflops_cpu[be] = 2.0 * s.M * s.N * s.K / median(tc) * 1e-9;
            gflops[be] = 2.0 * s.M * s.N * s.K / sec * 1e-9;
            step_s[be] += sec * s.per_step;
        }
        double maxdiff = 0, scale = 1e-30;
        if (!Cm[0].empty() && !Cm[1].empty())
            for (size_t i = 0; i < Cm[0].size(); i++) {
                maxdiff = std::max(maxdiff, static_cast<double>(std::fabs(Cm[0][i] - Cm[1][i])));
                scale = std::max(scale, static_cast<double>(std::fabs(Cm[0][i])));
            }
        std::printf("%-20s %6lld %6lld %6lld %8.1f [%7.1f] %8.1f [%7.1f] %7.2f %9.1e %8.1f [%7.1f] %9.2f\n",
                    s.name.c_str(), static_cast<long long>(s.M), static_cast<long long>(s.N),
                    static_cast<long long>(s.K), gflops[0], gflops_cpu[0], gflops[1], gflops_cpu[1],
                    gflops[0] > 0 ? gflops[1] / gflops[0] : 0.0, maxdiff / scale, gflops[2], gflops_cpu[2],
                    gflops_cpu[1] > 0 ? gflops_cpu[2] / gflops_cpu[1] : 0.0);
    }
    std::printf("one training step's GEMMs: openblas %.1f ms, onednn %.1f ms, ratio %.2f; bf16 %.1f ms\n",
                step_s[0] * 1e3, step_s[1] * 1e3, step_s[1] > 0 ? step_s[0] / step_s[1] : 0.0, step_s[2] * 1e3);
    // The probe trainer.precision: auto runs (kernels/gemm_probe.h) on these step shapes, and what it takes.
    std::vector<llmt::kernels::GemmShape> step;
    for (const Shape& s : shapes)
        if (s.per_step > 0)
            step.push_back({s.ta, s.tb, s.M, s.N, s.K, s.name.find("dW") != std::string::npos, double(s.per_step)});
    const llmt::kernels::GemmProbe p = llmt::kernels::probe_gemm_rates(step);
    std::printf(
        "probe (trainer.precision auto, %s): fp32 %.1f GFLOP/s, bf16 %.1f GFLOP/s (%s), %.2f s; auto takes %s\n",
        llmt::kernels::cpu_gemm_libraries().c_str(), p.fp32_gflops, p.bf16_gflops, p.bf16_path.c_str(), p.seconds,
        llmt::train::faster_precision(p.fp32_gflops, p.bf16_gflops).c_str());
    return 0;
}
