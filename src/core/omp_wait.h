// OpenMP threads that wait without burning CPU when the cores are shared. GNU OpenMP (libgomp) spins up to
// 300,000 iterations (~1-10 ms) at every barrier and idle point before sleeping, unless OMP_WAIT_POLICY or
// GOMP_SPINCOUNT says otherwise; with other processes on the cores, a spinning thread takes the time slice the
// thread it waits for needs, and CPU time goes to spinning (a measured GPT-2 tiny decode ran at 2.2 tokens/s with
// 2 threads on 2 busy cores, 127 with 1). libgomp reads its environment once, in its load-time constructor, before
// main: so the compute subcommands re-execute the binary once with GOMP_SPINCOUNT set (docs/architecture.md,
// "Start-up"). A user's own OMP_WAIT_POLICY or GOMP_SPINCOUNT is kept and nothing is re-executed.
// Thread safety: call first thing in main, before any thread exists.
#pragma once

namespace llmt {

// Spin iterations before a waiting OpenMP thread sleeps: ~0.1 ms. Enough to catch a partner that arrives within
// the same time slice (an idle machine's barriers), small against the time slice a preempted partner needs.
inline constexpr const char* kOmpSpinCount = "10000";
// Decoding (generate, chat): none, threads sleep at once (OMP_WAIT_POLICY=passive). A decode step forks a team
// only for its LM head (models/kv_decoder.cpp: the layers run on one thread at small sizes), then the worker
// waits a whole token (ms) for the next fork: any spin is CPU spent for nothing, ~10% of a tiny GPT's decode
// CPU time with 10000 (docs/benchmarks.md, "Generation under contention").
inline constexpr const char* kDecodeOmpSpinCount = "0";

// GOMP_SPINCOUNT for argv's subcommand: kOmpSpinCount for train, eval, print-config and version --gemm-probe
// (the last two may time GEMMs for trainer.precision: auto), kDecodeOmpSpinCount for generate and chat, nullptr
// for subcommands that run no OpenMP compute.
const char* omp_spin_count_for(int argc, char** argv);

// For those subcommands, when neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT is set: sets GOMP_SPINCOUNT and
// re-executes /proc/self/exe with the same argv (the pid stays). Returns only when nothing was re-executed
// (other subcommands, the user's own setting, or exec failed: the run goes on with libgomp's default).
void limit_omp_spinning(int argc, char** argv);

}  // namespace llmt
