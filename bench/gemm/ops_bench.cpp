// Per-op timings of the CPU kernels at one GPT-2 training config (default gpt2_tiny_cpu: B=8, T=256,
// C=256, 4 layers, 4 heads, vocab 50257 padded to 50304): the median time of each forward/backward op,
// its count per training step, and the resulting step time and op share, so optimisation goes where
// the time is. Usage: ops_bench [--b 8] [--t 256] [--c 256] [--layers 4] [--heads 4] [--reps 5]
#include <omp.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/classifier.h"
#include "kernels/cpu/encoder.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/residual.h"

using namespace llmt::kernels::cpu;

namespace {

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double cpu_s() {  // CPU seconds of this process: steadier than wall time on a shared machine
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

std::vector<float> buf(size_t n, uint32_t seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

struct Row {
    std::string name;
    int per_step;
    double ms;
    double cpu_ms;
};

}  // namespace

int main(int argc, char** argv) {
    int B = 8, T = 256, C = 256, L = 4, NH = 4, reps = 5;
    const int V = 50257, Vp = 50304;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--b")) B = std::stoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--t")) T = std::stoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--c")) C = std::stoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--layers")) L = std::stoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--heads")) NH = std::stoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--reps")) reps = std::stoi(argv[i + 1]);
        else {
            std::fprintf(stderr, "usage: %s [--b N] [--t N] [--c N] [--layers N] [--heads N] [--reps N]\n",
                         argv[0]);
            return 2;
        }
    }
    const int BT = B * T;
    const size_t BTC = static_cast<size_t>(BT) * C;
    std::vector<int32_t> ids(static_cast<size_t>(BT));
    std::mt19937 rng(7);
    for (auto& x : ids) x = static_cast<int32_t>(rng() % V);

    auto wte = buf(static_cast<size_t>(Vp) * C, 1, 0.02f), wpe = buf(static_cast<size_t>(T) * C, 2, 0.02f);
    auto dwte = buf(wte.size(), 3), dwpe = buf(wpe.size(), 4);
    auto x = buf(BTC, 5), y = buf(BTC, 6), dx = buf(BTC, 7), dy = buf(BTC, 8);
    auto w = buf(C, 9), bia = buf(C, 10), dw = buf(C, 11), db = buf(C, 12);
    std::vector<float> mean(static_cast<size_t>(BT)), rstd(static_cast<size_t>(BT));
    auto qkv = buf(3 * BTC, 13), dqkv = buf(3 * BTC, 14);
    std::vector<float> lse(static_cast<size_t>(B) * NH * T);
    auto fch = buf(4 * BTC, 15), fch2 = buf(4 * BTC, 16), dfch = buf(4 * BTC, 17);
    auto wqkv = buf(static_cast<size_t>(3) * C * C, 18, 0.02f), dwqkv = buf(wqkv.size(), 19);
    auto bqkv = buf(static_cast<size_t>(3) * C, 20), dbqkv = buf(bqkv.size(), 21);
    auto wfc = buf(static_cast<size_t>(4) * C * C, 22, 0.02f), dwfc = buf(wfc.size(), 23);
    auto wpr = buf(static_cast<size_t>(C) * 4 * C, 24, 0.02f), dwpr = buf(wpr.size(), 25);
    auto wap = buf(static_cast<size_t>(C) * C, 26, 0.02f), dwap = buf(wap.size(), 27);
    auto bfc = buf(static_cast<size_t>(4) * C, 28), dbfc = buf(bfc.size(), 29);
    auto logits = buf(static_cast<size_t>(BT) * Vp, 30);
    std::vector<float> losses(static_cast<size_t>(BT));
    const size_t nparams = wte.size() + wpe.size() + static_cast<size_t>(L) * (12 * C * C + 13 * C) + 2 * C;
    auto p = buf(nparams, 31), g = buf(nparams, 32), m = buf(nparams, 33), v = buf(nparams, 34);
    for (auto& e : v) e = e * e;

    std::vector<Row> rows;
    auto time = [&](const std::string& name, int per_step, const std::function<void()>& fn) {
        std::vector<double> t, tc;
        for (int r = 0; r < reps + 1; r++) {
            const double t0 = now_s(), c0 = cpu_s();
            fn();
            if (r > 0) {
                t.push_back(now_s() - t0);
                tc.push_back(cpu_s() - c0);
            }
        }
        std::sort(t.begin(), t.end());
        std::sort(tc.begin(), tc.end());
        rows.push_back({name, per_step, t[t.size() / 2] * 1e3, tc[tc.size() / 2] * 1e3});
    };

    time("encoder fwd", 1, [&] { encoder_forward(x.data(), ids.data(), wte.data(), wpe.data(), B, T, C); });
    time("encoder bwd", 1, [&] { encoder_backward(dwte.data(), dwpe.data(), dy.data(), ids.data(), B, T, C); });
    time("layernorm fwd", 2 * L + 1, [&] {
        layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), bia.data(), 1e-5f, B, T, C);
    });
    time("layernorm bwd", 2 * L + 1, [&] {
        layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(),
                           rstd.data(), B, T, C);
    });
    time("matmul qkv fwd", L, [&] { matmul_forward(qkv.data(), x.data(), wqkv.data(), bqkv.data(), BT, C, 3 * C); });
    time("matmul qkv bwd", L, [&] {
        matmul_backward(dx.data(), dwqkv.data(), dbqkv.data(), dqkv.data(), x.data(), wqkv.data(), BT, C, 3 * C);
    });
    time("attention fwd", L, [&] { attention_forward(y.data(), lse.data(), qkv.data(), B, T, C, NH, NH); });
    time("attention bwd", L, [&] {
        attention_backward(dqkv.data(), dy.data(), qkv.data(), y.data(), lse.data(), B, T, C, NH, NH);
    });
    time("matmul attproj fwd", L, [&] { matmul_forward(y.data(), x.data(), wap.data(), bia.data(), BT, C, C); });
    time("matmul attproj bwd", L, [&] {
        matmul_backward(dx.data(), dwap.data(), db.data(), dy.data(), x.data(), wap.data(), BT, C, C);
    });
    time("residual fwd", 2 * L, [&] { residual_forward(y.data(), x.data(), dx.data(), BTC); });
    time("matmul fc fwd", L, [&] { matmul_forward(fch.data(), x.data(), wfc.data(), bfc.data(), BT, C, 4 * C); });
    time("matmul fc bwd", L, [&] {
        matmul_backward(dx.data(), dwfc.data(), dbfc.data(), dfch.data(), x.data(), wfc.data(), BT, C, 4 * C);
    });
    time("gelu fwd", L, [&] { gelu_forward(fch2.data(), fch.data(), 4 * BTC); });
    time("gelu bwd", L, [&] { gelu_backward(dfch.data(), fch.data(), dfch.data(), 4 * BTC); });
    time("matmul fcproj fwd", L, [&] { matmul_forward(y.data(), fch2.data(), wpr.data(), bia.data(), BT, 4 * C, C); });
    time("matmul fcproj bwd", L, [&] {
        matmul_backward(dfch.data(), dwpr.data(), db.data(), dy.data(), fch2.data(), wpr.data(), BT, 4 * C, C);
    });
    time("matmul lm_head fwd", 1, [&] { matmul_forward(logits.data(), x.data(), wte.data(), nullptr, BT, C, Vp); });
    std::vector<int32_t> targets = ids;
    time("classifier fused", 1, [&] {
        classifier_forward_backward(losses.data(), logits.data(), targets.data(), 1.0f / BT, B, T, V, Vp);
    });
    time("matmul lm_head bwd", 1, [&] {
        matmul_backward(dx.data(), dwte.data(), nullptr, logits.data(), x.data(), wte.data(), BT, C, Vp);
    });
    time("grad norm", 1, [&] { (void)sum_squares(g.data(), nparams); });
    llmt::kernels::AdamWParams hp;
    hp.lr = 1e-4f;
    time("adamw", 1, [&] { adamw_update(p.data(), m.data(), v.data(), g.data(), nparams, hp); });

    double total = 0, total_cpu = 0;
    for (const Row& r : rows) {
        total += r.ms * r.per_step;
        total_cpu += r.cpu_ms * r.per_step;
    }
    std::printf("ops_bench: B=%d T=%d C=%d L=%d NH=%d Vp=%d, %d threads, gemm=%s, isa: %s\n", B, T, C, L, NH, Vp,
                omp_get_max_threads(), gemm_backend_name(), llmt::cpu_features().describe().c_str());
    std::printf("%-22s %10s %10s %6s %10s %12s %6s\n", "op", "ms", "cpu ms", "x/step", "ms/step",
                "cpu ms/step", "share");
    for (const Row& r : rows)
        std::printf("%-22s %10.3f %10.3f %6d %10.2f %12.2f %5.1f%%\n", r.name.c_str(), r.ms, r.cpu_ms, r.per_step,
                    r.ms * r.per_step, r.cpu_ms * r.per_step, 100.0 * r.cpu_ms * r.per_step / total_cpu);
    std::printf("step total %.1f ms wall -> %.0f tokens/s; %.1f CPU-ms -> %.0f tokens per CPU-second "
                "(kernels only, %d tokens/step; share is of CPU time)\n",
                total, BT / (total * 1e-3), total_cpu, BT / (total_cpu * 1e-3), BT);
    return 0;
}
