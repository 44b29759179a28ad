// Per-op thread counts (threads.h).
#include "kernels/cpu/threads.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "core/cpu_budget.h"

namespace llmt::kernels::cpu {

int apply_cpu_threads(int configured) {
    if (configured > 0) omp_set_num_threads(configured);
    else if (!std::getenv("OMP_NUM_THREADS")) omp_set_num_threads(default_cpu_threads());
    return omp_get_max_threads();
}

int threads_for_work(double flops, int budget) {
    const int max = std::max(1, budget);
    const double want = std::floor(flops / kMinFlopsPerThread);
    return want >= max ? max : std::max(1, static_cast<int>(want));
}

int threads_for_flops(double flops) { return threads_for_work(flops, omp_get_max_threads()); }

ScopedOmpThreads::ScopedOmpThreads(int n) : saved_(omp_get_max_threads()) {
    if (n != saved_) omp_set_num_threads(n);
}

ScopedOmpThreads::~ScopedOmpThreads() {
    if (omp_get_max_threads() != saved_) omp_set_num_threads(saved_);
}

}  // namespace llmt::kernels::cpu
