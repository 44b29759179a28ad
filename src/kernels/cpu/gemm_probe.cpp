// The GEMM probe (kernels/gemm_probe.h) on the CPU GEMMs training runs: sgemm (fp32) and gemm_bf16.
#include "kernels/gemm_probe.h"

#include <fmt/format.h>
#include <omp.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <limits>

#include "kernels/cpu/bf16_isa.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16.h"

#if LLMT_HAVE_ONEDNN
#include <dnnl.h>
#endif

namespace llmt::kernels {
namespace {

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double thread_cpu_s() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// CPU seconds the OpenMP team's threads have run, each read on its own thread. Not the process clock: Linux
// adds another running thread's time to it only at a scheduler tick, so a 2 ms GEMM on 2 threads read as
// 1-thread CPU time (gemm_bench showed 440 GFLOP per CPU-second on a core whose FMA peak is 280).
double team_cpu_s(int threads) {
    double sum = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sum)
    sum += thread_cpu_s();
    return sum;
}

// Operands of the largest shape: values in [-1, 1) from a fixed LCG (the rates do not depend on them).
std::vector<float> operand(size_t n, uint32_t seed) {
    std::vector<float> v(n);
    for (float& x : v) {
        seed = seed * 1664525u + 1013904223u;
        x = static_cast<float>(seed >> 8) * (2.0f / 16777216.0f) - 1.0f;
    }
    return v;
}

}  // namespace

void add_linear_gemms(std::vector<GemmShape>& shapes, int64_t rows, int64_t out, int64_t in, double weight,
                      bool weight_grad) {
    auto add = [&](GemmShape s) {
        for (GemmShape& have : shapes)
            if (have.same_problem(s)) {
                have.weight += s.weight;
                return;
            }
        shapes.push_back(s);
    };
    add({false, true, rows, out, in, false, weight});   // out (rows,out) = inp (rows,in) @ W^T
    add({false, false, rows, in, out, false, weight});  // dinp (rows,in) = dout (rows,out) @ W
    if (weight_grad) add({true, false, out, in, rows, true, weight});  // dW (out,in) += dout^T @ inp
}

GemmProbe probe_gemm_rates(const std::vector<GemmShape>& shapes, int reps) {
    const double t_start = now_s();
    GemmProbe p;
    p.threads = omp_get_max_threads();
    p.bf16_path = cpu::bf16_path_name(cpu::bf16_selection().path);
    p.bf16_how = cpu::gemm_bf16_describe();
    size_t a_max = 1, b_max = 1, c_max = 1;
    for (const GemmShape& s : shapes) {
        a_max = std::max(a_max, static_cast<size_t>(s.M * s.K));
        b_max = std::max(b_max, static_cast<size_t>(s.K * s.N));
        c_max = std::max(c_max, static_cast<size_t>(s.M * s.N));
    }
    const std::vector<float> A = operand(a_max, 1), B = operand(b_max, 2);
    std::vector<float> C(c_max, 0.0f);
    double flops = 0, t32 = 0, t16 = 0;
    std::vector<double> best32(shapes.size(), std::numeric_limits<double>::infinity()), best16 = best32;
    for (int r = 0; r < std::max(1, reps); ++r)
        for (size_t i = 0; i < shapes.size(); ++i) {
            const GemmShape& s = shapes[i];
            const int64_t lda = s.trans_a ? s.M : s.K, ldb = s.trans_b ? s.K : s.N;
            const float beta = s.accumulate ? 1.0f : 0.0f;
            double t0 = team_cpu_s(p.threads);
            cpu::sgemm(s.trans_a, s.trans_b, s.M, s.N, s.K, 1.0f, A.data(), lda, B.data(), ldb, beta, C.data(), s.N);
            best32[i] = std::min(best32[i], (team_cpu_s(p.threads) - t0) / p.threads);
            t0 = team_cpu_s(p.threads);
            cpu::gemm_bf16(s.trans_a, s.trans_b, s.M, s.N, s.K, A.data(), lda, B.data(), ldb, beta, C.data(), s.N);
            best16[i] = std::min(best16[i], (team_cpu_s(p.threads) - t0) / p.threads);
        }
    for (size_t i = 0; i < shapes.size(); ++i) {
        flops += shapes[i].flops() * shapes[i].weight;
        t32 += best32[i] * shapes[i].weight;
        t16 += best16[i] * shapes[i].weight;
    }
    p.fp32_gflops = t32 > 0 ? flops / t32 * 1e-9 : 0;
    p.bf16_gflops = t16 > 0 ? flops / t16 * 1e-9 : 0;
    p.seconds = now_s() - t_start;
    return p;
}

std::string cpu_gemm_libraries() {
    const cpu::GemmBackend backend = cpu::gemm_backend();
    const std::string bf16 = fmt::format("bf16 {}", cpu::bf16_path_name(cpu::bf16_selection().path));
#if LLMT_HAVE_ONEDNN
    const cpu::Bf16Facts& f = cpu::bf16_facts();
    if (f.onednn_error.empty()) {
        const dnnl_version_t* v = dnnl_version();
        return fmt::format("{} fp32, {}, onednn {}.{}.{} ({})", cpu::gemm_backend_name(backend), bf16, v->major,
                           v->minor, v->patch, cpu::onednn_isa_name(f.onednn_isa));
    }
#endif
    return fmt::format("{} fp32, {}", cpu::gemm_backend_name(backend), bf16);
}

}  // namespace llmt::kernels
