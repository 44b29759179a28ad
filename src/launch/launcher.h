// The local worker launcher behind `llmtrain launch` (docs/distributed.md "Launcher"), after torchrun's
// local elastic agent: spawns nproc_per_node workers with the worker-level environment (DESIGN.md §4),
// relays their output line by line with a "[rank k] " prefix, forwards stop signals, tears the group down
// when one worker fails, and restarts the group while restarts remain.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launch/node_env.h"

namespace llmt::launch {

struct LaunchOptions {
    NodeEnv node;
    // The worker's command line after `--`: a subcommand of this binary (e.g. {"train", "--config", "F"}),
    // or the arguments of exec_program.
    std::vector<std::string> worker_args;
    // Run this program (PATH lookup) instead of this binary, like torchrun's --no-python.
    std::optional<std::string> exec_program;
    std::string argv0 = "llmtrain";  // argv[0] the workers see when running this binary
    int max_restarts = 0;
    double kill_grace_s = 30;        // SIGTERM -> SIGKILL delay when tearing workers down
    int cpu_count = 1;               // for the OMP_NUM_THREADS default
};

// Environment changes for one worker: the worker level of the contract. Pairs of (name, value); an empty
// value means "remove from the environment". `omp_threads` is already resolved.
std::vector<std::pair<std::string, std::string>> worker_env(const NodeEnv& node, int local_rank, int master_port,
                                                            int restart_count, int max_restarts,
                                                            const std::optional<int>& omp_threads);

// The worker command for an attempt: for `train` on a restart, appends `--resume auto` unless a --resume
// is already there (the run continues from its latest checkpoint).
std::vector<std::string> worker_args_for_attempt(const LaunchOptions& opt, int restart_count);

// OMP_NUM_THREADS for the workers: nullopt when the launcher's environment already sets it (it is passed
// through untouched), else max(1, cpu_count / nproc_per_node).
std::optional<int> default_omp_threads(int cpu_count, int nproc_per_node);

// A TCP port that was free a moment ago on `addr` (bind to port 0, read it back, close).
// Throws DistError when no socket can be bound.
int pick_free_port(const std::string& addr);

// Runs the workers until all succeed, or one fails with no restart left, or a stop signal ends them.
// A worker of this binary that exits 2 (bad input) is not restarted: the same command would fail again.
// Returns 0 when every worker of the last attempt exited 0, else the first failing worker's exit code
// (128 + signal for a signal); 128 + signal when a SIGTERM/SIGINT to the launcher stopped workers that
// then exited 0. Installs SIGTERM/SIGINT/SIGCHLD handlers for its duration and makes this process a child
// subreaper, so no descendant outlives the call. Not thread-safe: one run_launch per process at a time.
int run_launch(const LaunchOptions& opt);

}  // namespace llmt::launch
