// FMA peak probe (peak_flops.h): 16 independent accumulator chains hide the FMA latency (4 cycles x 2
// ports on current cores), so the loop is throughput-bound. Each thread divides its FLOPs by its own CPU
// time, not the wall time: a thread that other processes keep off its core for a while gets no CPU time
// meanwhile, so a probe made on a loaded machine still reads the core's rate (a wall-clock probe read a
// third of it and `make run` printed mfu 286%). The chains must live in registers: without
// the full unroll GCC -O2 kept them in a stack array (a load and a store per FMA) and the probe read
// 58 GFLOP/s per core on a machine that does 210, so CPU MFU printed 250%.
#include "kernels/cpu/peak_flops.h"

#include <omp.h>

#include <time.h>

#include <mutex>
#include <vector>

#include "kernels/cpu/simd.h"

namespace llmt::kernels::cpu {
namespace {

constexpr long kIters = 1 << 20;  // x 16 chains x lanes x 2 FLOP per thread: ~30 ms at AVX-512 rates

LLMT_TARGET_AVX512 float fma_loop_avx512(float seed) {
    __m512 acc[16];
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_ps(seed + static_cast<float>(i));
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (long it = 0; it < kIters; ++it) {
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
    }
    __m512 s = acc[0];
    for (int i = 1; i < 16; ++i) s = _mm512_add_ps(s, acc[i]);
    return _mm512_reduce_add_ps(s);
}

LLMT_TARGET_AVX2 float fma_loop_avx2(float seed) {
    __m256 acc[16];
    for (int i = 0; i < 16; ++i) acc[i] = _mm256_set1_ps(seed + static_cast<float>(i));
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    for (long it = 0; it < kIters; ++it) {
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
    }
    __m256 s = acc[0];
    for (int i = 1; i < 16; ++i) s = _mm256_add_ps(s, acc[i]);
    alignas(32) float out[8];
    _mm256_store_ps(out, s);
    return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}

float fma_loop_scalar(float seed) {
    float acc[16];
    for (int i = 0; i < 16; ++i) acc[i] = seed + static_cast<float>(i);
    for (long it = 0; it < kIters / 8; ++it) {
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) acc[i] = acc[i] * 0.999999f + 1e-7f;
    }
    float s = 0;
    for (float v : acc) s += v;
    return s;
}

// CPU seconds the calling thread has run.
double thread_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double measure() {
    const simd::Isa isa = simd::isa();
    const double lanes = isa == simd::Isa::kAvx512 ? 16 : isa == simd::Isa::kAvx2 ? 8 : 1;
    const double iters = isa == simd::Isa::kScalar ? kIters / 8 : kIters;
    const double flops_per_thread = iters * 16 * lanes * 2;
    const int threads = omp_get_max_threads();
    std::vector<double> best(static_cast<size_t>(threads), 0.0);  // FLOP per CPU second, per thread
    float sink = 0;  // consumed below so the loops are not optimised away
    for (int rep = 0; rep < 3; ++rep) {  // the first rep also wakes the cores up to their running clock
#pragma omp parallel num_threads(threads)
        {
            const int t = omp_get_thread_num();
            const float seed = static_cast<float>(t);
            const double c0 = thread_cpu_seconds();
            const float r = isa == simd::Isa::kAvx512 ? fma_loop_avx512(seed)
                            : isa == simd::Isa::kAvx2 ? fma_loop_avx2(seed)
                                                      : fma_loop_scalar(seed);
            const double cpu_s = thread_cpu_seconds() - c0;
            if (cpu_s > 0 && flops_per_thread / cpu_s > best[static_cast<size_t>(t)])
                best[static_cast<size_t>(t)] = flops_per_thread / cpu_s;
#pragma omp atomic
            sink += r;
        }
    }
    volatile float keep = sink;
    (void)keep;
    double total = 0;
    for (double b : best) total += b;
    return total;
}

}  // namespace

double measured_peak_flops() {
    static std::once_flag once;
    static double peak = 0;
    std::call_once(once, [] { peak = measure(); });
    return peak;
}

}  // namespace llmt::kernels::cpu
