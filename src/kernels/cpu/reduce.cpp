// sum of squares in fp64 and in-place scale (reduce.h).
#include "kernels/cpu/reduce.h"

#include <vector>

#include "kernels/cpu/simd.h"

namespace llmt::kernels::cpu {
namespace {

LLMT_CPU_CLONES
double sum_squares_block(const float* x, long n) {
    double s = 0.0;  // fp64 per lane: memory-bound anyway, and exact enough for any N
#pragma omp simd reduction(+ : s)
    for (long i = 0; i < n; i++) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    return s;
}

}  // namespace

double sum_squares(const float* x, size_t N) {
    constexpr long kBlock = 65536;
    const long n = static_cast<long>(N);
    const long blocks = (n + kBlock - 1) / kBlock;
    // One partial per block, summed in block order: the result depends on N only, not on the thread
    // count or on which thread finishes first (an OpenMP reduction combines in arrival order), so the
    // gradient norm and clipping are bit-reproducible (run.deterministic).
    std::vector<double> partial(static_cast<size_t>(blocks), 0.0);
#pragma omp parallel for schedule(static)
    for (long b = 0; b < blocks; b++) {
        const long i0 = b * kBlock;
        partial[static_cast<size_t>(b)] = sum_squares_block(x + i0, (n - i0) < kBlock ? n - i0 : kBlock);
    }
    double total = 0.0;
    for (double p : partial) total += p;
    return total;
}

void scale_inplace(float* x, size_t N, float s) {
    const long n = static_cast<long>(N);
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; i++) x[i] *= s;
}

}  // namespace llmt::kernels::cpu
