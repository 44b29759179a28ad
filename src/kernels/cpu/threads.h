// The thread count of one CPU op, decided from its size: a GEMM too small to amortise a fork/join (decode's
// one-row GEMMs: a few MFLOP, microseconds of work) runs on fewer threads than the process's OpenMP default
// (core/cpu_budget.h), so an oversubscribed machine does not make every token wait for a descheduled thread.
// Thread safety: ScopedOmpThreads changes the calling thread's OpenMP thread-count setting only.
#pragma once

namespace llmt::kernels::cpu {

// FLOPs of work below which adding a thread does not pay: ~8 MFLOP is ~100 us of one core's GEMM at 80
// GFLOP/s, against a fork/join of 2-10 us idle and a scheduler time slice (ms) when a thread is preempted.
inline constexpr double kMinFlopsPerThread = 8e6;

// The process's OpenMP thread count from run.threads: `configured` when > 0; else OMP_NUM_THREADS when set
// (the launcher sets it per worker); else the CPU budget (core/cpu_budget.h: affinity mask and cgroup quota).
// Returns the count in effect. Call outside parallel regions, before the first op.
int apply_cpu_threads(int configured);

// The rule: threads for an op of `flops` work under a budget of `budget` threads: one per kMinFlopsPerThread,
// between 1 and `budget` (at least 1). Pure; decode's per-layer ops (a few hundred kFLOP a row at d_model 256)
// get 1 thread, its LM head (50257 x 256: ~26 MFLOP) or a prefill's GEMMs (MFLOPs per row) get more.
int threads_for_work(double flops, int budget);

// threads_for_work(flops, omp_get_max_threads()): the calling thread's current OpenMP count as the budget.
int threads_for_flops(double flops);

// Sets omp_set_num_threads(n) for the object's lifetime (outside parallel regions), then restores it.
class ScopedOmpThreads {
public:
    explicit ScopedOmpThreads(int n);
    ~ScopedOmpThreads();
    ScopedOmpThreads(const ScopedOmpThreads&) = delete;
    ScopedOmpThreads& operator=(const ScopedOmpThreads&) = delete;

private:
    int saved_;
};

}  // namespace llmt::kernels::cpu
