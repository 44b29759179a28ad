// The local worker launcher behind `llmtrain launch` (docs/distributed.md "Launcher"), after torchrun's
// local elastic agent: spawns nproc_per_node workers with the worker-level environment (docs/design.md §4),
// relays their output line by line with a "[rank k] " prefix, forwards stop signals, tears the group down
// when one worker fails, and restarts the group while restarts remain. Other programs than this binary (a
// PyTorch script) get exactly torchrun's worker environment (worker_env.h), per-rank log files
// (worker_logs.h) and their TORCHELASTIC_ERROR_FILE read back into the failure message (error_file.h).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launch/node_env.h"
#include "launch/worker_env.h"

namespace llmt::launch {

struct LaunchOptions {
    NodeEnv node;
    // The worker's command line after `--`: a subcommand of this binary (e.g. {"train", "--config", "F"}),
    // or the arguments of exec_program.
    std::vector<std::string> worker_args;
    // Run this program (PATH lookup) instead of this binary, like torchrun's --no-python.
    std::optional<std::string> exec_program;
    std::string run_id = "none";          // TORCHELASTIC_RUN_ID (torchrun's --rdzv-id)
    std::string log_dir;                  // --log-dir; "" = a temporary directory, removed after a success
    std::vector<int> redirects, tee;      // per local rank, kStdOut|kStdErr bits (worker_logs.h); empty = none
    std::string argv0 = "llmtrain";  // argv[0] the workers see when running this binary
    int max_restarts = 0;
    double kill_grace_s = 30;        // SIGTERM -> SIGKILL delay when tearing workers down
    int cpu_count = 1;               // for the OMP_NUM_THREADS default

    WorkerKind kind() const { return exec_program ? WorkerKind::kProgram : WorkerKind::kEngine; }
};

// The environment shared by the launch's workers (run id, restarts, the OMP_NUM_THREADS default).
WorkerGroupEnv worker_group_env(const LaunchOptions& opt);

// The worker command for an attempt: for `train` on a restart, appends `--resume auto` unless a --resume
// is already there (the run continues from its latest checkpoint).
std::vector<std::string> worker_args_for_attempt(const LaunchOptions& opt, int restart_count);

// A TCP port that was free a moment ago on `addr` (bind to port 0, read it back, close).
// Throws DistError when no socket can be bound.
int pick_free_port(const std::string& addr);

// Runs the workers until all succeed, or one fails with no restart left, or a stop signal ends them.
// A worker of this binary that exits 2 (bad input) is not restarted: the same command would fail again.
// Each failure is logged with the worker's error file (error_file.h); the log directory is kept after a
// failure and removed after a success when it was a temporary one.
// Returns 0 when every worker of the last attempt exited 0, else the first failing worker's exit code
// (128 + signal for a signal); 128 + signal when a SIGTERM/SIGINT to the launcher stopped workers that
// then exited 0. Installs SIGTERM/SIGINT/SIGCHLD handlers for its duration and makes this process a child
// subreaper, so no descendant outlives the call. Not thread-safe: one run_launch per process at a time.
int run_launch(const LaunchOptions& opt);

}  // namespace llmt::launch
