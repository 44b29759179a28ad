// Convolution forward and backward on the CPU at the MNIST CNN's layers (B = 128: 28x28x1 -> 32 and
// 14x14x32 -> 64, 3x3, pad 1), ours (kernels/ops.h, NHWC) vs PyTorch (F.conv2d, NCHW, conv_torch.py) in one
// run on the same thread count: the fastest of --reps runs in ms, images/s and GFLOP/s of each, and the ratio
// ours/torch. The first layer's backward has no input gradient (as in the model). Usage:
//   conv_cpu_bench [--b 128] [--reps 20] [--threads N (default: OpenMP's)] [--cpu-time 1: process CPU time]
#include <omp.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernels/ops.h"

using namespace llmt;
using namespace llmt::kernels;

namespace {

struct Layer {
    const char* name;
    int H, W, C, OC, k, stride, pad;
    bool dinp;
};

std::vector<float> randn(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

// The clock: wall time, or with --cpu-time this process's CPU time (on a machine shared with other work the
// CPU time a 1-thread run gets is the steadier per-core figure; docs/benchmarks.md "GEMM (CPU)").
bool g_cpu_time = false;
double now_ms() {
    if (!g_cpu_time)
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return 1e3 * static_cast<double>(ts.tv_sec) + 1e-6 * static_cast<double>(ts.tv_nsec);
}

// The fastest of `reps` runs after a warm-up: on a shared machine the other processes only ever add time, so
// the minimum is the steadiest estimate of the op's own cost (conv_torch.py takes the same statistic).
double min_ms(int reps, const std::function<void()>& fn) {
    fn();
    double best = 1e30;
    for (int i = 0; i < reps; i++) {
        const double t0 = now_ms();
        fn();
        best = std::min(best, now_ms() - t0);
    }
    return best;
}

struct Times {
    double fwd_ms, bwd_ms;
};

Times time_ours(const Layer& l, int B, int reps) {
    const Conv2dGeom g{l.k, l.k, l.stride, l.pad};
    const int64_t OH = conv_out_extent(l.H, l.k, l.stride, l.pad), OW = conv_out_extent(l.W, l.k, l.stride, l.pad);
    const int64_t K = int64_t{l.k} * l.k * l.C, rows = B * OH * OW;
    auto x = randn(static_cast<size_t>(B) * l.H * l.W * l.C, 1), w = randn(static_cast<size_t>(l.OC * K), 2);
    auto b = randn(l.OC, 3), dout = randn(static_cast<size_t>(rows * l.OC), 4);
    std::vector<float> out(dout.size()), cols(static_cast<size_t>(rows * K)), dx(x.size()), dw(w.size()), db(l.OC);
    const Tensor tx(x.data(), {B, l.H, l.W, l.C}), tw(w.data(), {l.OC, l.k, l.k, l.C}), tb(b.data(), {l.OC});
    const Tensor tcols(cols.data(), {rows, K}), tout(out.data(), {B, OH, OW, l.OC});
    const Tensor tdout(dout.data(), {B, OH, OW, l.OC});
    const Tensor tdx = l.dinp ? Tensor(dx.data(), {B, l.H, l.W, l.C}) : Tensor();
    const Tensor tdw(dw.data(), {l.OC, l.k, l.k, l.C}), tdb(db.data(), {l.OC});
    Times t{};
    t.fwd_ms = min_ms(reps, [&] { conv2d_forward(tout, tcols, tx, tw, tb, g); });
    // the backward consumes cols (dcols overwrites it): each timed backward follows a forward, timed apart
    t.bwd_ms = 1e30;
    for (int i = 0; i <= reps; i++) {
        conv2d_forward(tout, tcols, tx, tw, tb, g);
        const double t0 = now_ms();
        conv2d_backward(tdx, tdw, tdb, tdout, tcols, tx, tw, g);
        const double ms = now_ms() - t0;
        if (i > 0) t.bwd_ms = std::min(t.bwd_ms, ms);  // run 0 is the warm-up
    }
    return t;
}

// PyTorch's times, from conv_torch.py's JSON lines ({"name": .., "fwd_ms": .., "bwd_ms": ..}).
std::map<std::string, Times> time_torch(const std::vector<Layer>& layers, int B, int reps, int threads) {
    std::string cmd = "/usr/bin/python3 " LLMT_CONV_TORCH_PY " " + std::to_string(threads) + " " +
                      std::to_string(reps) + (g_cpu_time ? " cpu" : " wall");
    for (const Layer& l : layers)
        cmd += " " + std::string(l.name) + ":" + std::to_string(B) + ":" + std::to_string(l.H) + ":" +
               std::to_string(l.W) + ":" + std::to_string(l.C) + ":" + std::to_string(l.OC) + ":" +
               std::to_string(l.k) + ":" + std::to_string(l.stride) + ":" + std::to_string(l.pad) + ":" +
               (l.dinp ? "1" : "0");
    std::map<std::string, Times> r;
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return r;
    char line[512];
    while (std::fgets(line, sizeof line, p)) {
        char name[64];
        Times t{};
        if (std::sscanf(line, "{\"name\": \"%63[^\"]\", \"fwd_ms\": %lf, \"bwd_ms\": %lf", name, &t.fwd_ms,
                        &t.bwd_ms) == 3)
            r[name] = t;
    }
    pclose(p);
    return r;
}

}  // namespace

int main(int argc, char** argv) {
    int B = 128, reps = 20, threads = omp_get_max_threads();
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--b")) B = std::atoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--cpu-time")) g_cpu_time = std::atoi(argv[i + 1]) != 0;
        else {
            std::fprintf(stderr, "usage: conv_cpu_bench [--b 128] [--reps 20] [--threads N] [--cpu-time 0|1]\n");
            return 2;
        }
    }
    omp_set_num_threads(threads);
    const std::vector<Layer> layers = {{"conv1_28x28x1_32", 28, 28, 1, 32, 3, 1, 1, false},
                                       {"conv2_14x14x32_64", 14, 14, 32, 64, 3, 1, 1, true}};
    std::printf("conv2d CPU, B=%d, %d threads, GEMM %s, %s time; ours NHWC vs torch NCHW (F.conv2d)\n", B, threads,
                gemm_backend_name(), g_cpu_time ? "process CPU" : "wall");
    std::map<std::string, Times> ours;
    for (const Layer& l : layers) ours[l.name] = time_ours(l, B, reps);
    const auto torch = time_torch(layers, B, reps, threads);
    std::printf("%-20s %-4s %10s %10s %10s %10s %10s %8s\n", "layer", "pass", "ours ms", "torch ms", "ours img/s",
                "torch img/s", "ours GF/s", "ratio");
    double ours_total = 0, torch_total = 0;
    for (const Layer& l : layers) {
        const double OH = static_cast<double>(conv_out_extent(l.H, l.k, l.stride, l.pad));
        const double OW = static_cast<double>(conv_out_extent(l.W, l.k, l.stride, l.pad));
        const double gemm_flops = 2.0 * B * OH * OW * l.k * l.k * l.C * l.OC;
        const Times o = ours[l.name];
        const auto it = torch.find(l.name);
        const Times t = it == torch.end() ? Times{0, 0} : it->second;
        const double fl[2] = {gemm_flops, gemm_flops * (l.dinp ? 2 : 1)};
        const double om[2] = {o.fwd_ms, o.bwd_ms}, tm[2] = {t.fwd_ms, t.bwd_ms};
        for (int pass = 0; pass < 2; pass++) {
            std::printf("%-20s %-4s %10.3f %10.3f %10.0f %10.0f %10.1f %7.2fx\n", l.name, pass ? "bwd" : "fwd",
                        om[pass], tm[pass], B / om[pass] * 1e3, tm[pass] > 0 ? B / tm[pass] * 1e3 : 0.0,
                        fl[pass] / om[pass] * 1e-6, tm[pass] > 0 ? tm[pass] / om[pass] : 0.0);
            ours_total += om[pass];
            torch_total += tm[pass];
        }
    }
    std::printf("%-20s %-4s %10.3f %10.3f %10.0f %10.0f %10s %7.2fx  (speed-up = torch ms / ours ms)\n", "both layers",
                "all", ours_total, torch_total, B / ours_total * 1e3, torch_total > 0 ? B / torch_total * 1e3 : 0.0,
                "", torch_total > 0 ? torch_total / ours_total : 0.0);
    if (torch.size() != layers.size()) {
        std::fprintf(stderr, "conv_cpu_bench: PyTorch's side (%s) gave no timings\n", LLMT_CONV_TORCH_PY);
        return 1;
    }
    return 0;
}
