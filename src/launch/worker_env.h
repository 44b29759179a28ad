// The worker level of the environment contract (docs/design.md §4, docs/distributed.md "Worker level"): the
// variables torchrun's local agent gives each worker, for our own engine (`-- train ...`) and for other
// programs (`-- python3 train.py`, `--exec`), which get exactly torchrun's rules.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launch/node_env.h"

namespace llmt::launch {

// What a worker runs: a subcommand of this binary, or another program (a PyTorch script, --exec).
enum class WorkerKind { kEngine, kProgram };

// TORCHELASTIC_USE_AGENT_STORE for a worker; "" removes the variable. The one place that decides whether
// workers look for a store served by the launcher. Today the launcher serves none: a program gets "False",
// so torch's rank 0 hosts its own TCPStore at MASTER_PORT (the launcher must leave that port free), and an
// engine worker gets the variable removed (an inherited "True" from an outer torchrun would send it looking
// for an agent store). Flip this when the launcher serves torch's TCPStore protocol.
std::string agent_store_env_value(WorkerKind kind);

// Per-worker values that change with the attempt.
struct WorkerSlot {
    int local_rank = 0;
    int master_port = 0;
    int restart_count = 0;
    std::string error_file;  // TORCHELASTIC_ERROR_FILE; empty = not set
};

// Everything a launch shares between its workers.
struct WorkerGroupEnv {
    WorkerKind kind = WorkerKind::kEngine;
    int max_restarts = 0;
    std::string run_id = "none";          // TORCHELASTIC_RUN_ID: torchrun's --rdzv-id (default "none")
    std::optional<int> omp_threads;       // resolved by default_omp_threads; nullopt = leave it as it is
};

// Environment changes for one worker: pairs of (name, value); an empty value removes the variable.
std::vector<std::pair<std::string, std::string>> worker_env(const NodeEnv& node, const WorkerGroupEnv& group,
                                                            const WorkerSlot& slot);

// OMP_NUM_THREADS for the workers; nullopt when the launcher's environment already sets it (it is passed
// through untouched). A program gets torchrun's rule: 1 when nproc_per_node > 1, else unset (nullopt). Our
// engine gets max(1, cpu_count / nproc_per_node): torchrun's 1 leaves a CPU trainer one thread on a machine
// with more cores than workers.
std::optional<int> default_omp_threads(WorkerKind kind, int cpu_count, int nproc_per_node);

// torchrun's warning when it sets OMP_NUM_THREADS=1 for the workers; empty when it does not apply.
std::string omp_threads_warning(WorkerKind kind, const std::optional<int>& omp_threads);

}  // namespace llmt::launch
