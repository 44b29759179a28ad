// The training loop: data -> the model's forward/backward -> clip -> the optimizer (AdamW or SGD), with
// logging, evaluation, checkpoints, exact resume and graceful stop, for any task (train/task.h: language
// modelling or image classification). One entry point so the CLI, the launcher's workers, pods and the
// job queue all start training the same way.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"

namespace llmt::train {

struct TrainOptions {
    config::Config cfg;
    // "" (new run), "auto" (resume output.run_id if it has a checkpoint, else start it), a run id under
    // output.root_dir, a run directory, or a checkpoints/step_N directory.
    std::string resume;
    bool dry_run = false;           // one forward pass: parameter count, memory plan, loss; no update
    std::vector<std::string> argv;  // recorded in meta.json
    bool progress = true;           // progress bar when stderr is a terminal
    // Stop after this optimizer step (checkpoint, exit 0) while the schedule still runs to max_steps:
    // a run split into parts (time-limited jobs, tests of exact resume). 0 = off.
    int64_t stop_at_step = 0;
    // Bytes one process may use (--max-memory); nullopt: the GPU's memory or the host's MemAvailable.
    // The estimate (train/run_plan.h) is checked against it before anything is allocated.
    std::optional<std::uint64_t> max_memory;
};

// What a finished (or stopped) run reports; also written to summary.json.
struct TrainResult {
    int exit_code = 0;  // 0, or 128 + signal when stopped by SIGINT/SIGTERM
    nlohmann::ordered_json summary;
};

// Runs training to trainer.max_steps (or until SIGTERM/SIGINT). Throws InputError for bad input
// (missing shards, a checkpoint of another model, ...), Error subclasses for runtime failures.
TrainResult run_training(const TrainOptions& opts);

// `llmtrain eval`: the task's evaluation (train/task.h) of `checkpoint` (a step dir, run dir or checkpoints
// dir), else of model.init_from: a language model's validation loss as the trainer computes it
// ({"val_loss", "tokens", "batches", "weights"}), a classifier's test set (test_accuracy, ...).
nlohmann::ordered_json run_evaluation(const config::Config& cfg, const std::string& checkpoint);

}  // namespace llmt::train
