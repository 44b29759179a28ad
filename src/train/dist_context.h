// The training process's place in a data-parallel job (DESIGN.md §4): torchrun's worker variables,
// the rendezvous store that rank 0 serves at MASTER_ADDR:MASTER_PORT, and the process group. A single
// process (WORLD_SIZE unset or 1) gets an inactive context whose helpers are identities, so the
// trainer has one code path.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "config/config.h"
#include "dist/env.h"
#include "dist/process_group.h"
#include "dist/store.h"

namespace llmt::train {

class DistContext {
public:
    // Reads the worker environment; with WORLD_SIZE > 1 connects the store (rank 0 serves it), runs
    // the rendezvous (duplicate ranks, mismatched world sizes and missing ranks are named) and creates
    // the process group of dist.backend (auto = gloo on CPU). Throws UsageError for a contradictory
    // environment, DistError/DistTimeout when peers do not arrive within dist.timeout_sec.
    static DistContext create(const config::Config& cfg);
    static DistContext single() { return DistContext(); }

    bool active() const { return pg_ != nullptr; }
    int rank() const { return env_.rank; }
    int world() const { return env_.world_size; }
    const dist::WorkerEnv& env() const { return env_; }
    dist::ProcessGroup& pg() { return *pg_; }

    // Mean over ranks of one value per rank (identity when inactive). Every rank must call it.
    double mean(double v);
    // Rank 0's `value` on every rank, through the store under `key` (each key used once per job).
    std::string from_rank0(const std::string& key, const std::string& value);
    void barrier();

private:
    DistContext() = default;
    dist::WorkerEnv env_;
    std::unique_ptr<dist::Store> store_;
    std::unique_ptr<dist::ProcessGroup> pg_;
};

}  // namespace llmt::train
