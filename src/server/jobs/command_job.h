// Command jobs: a job body with "command" (and no "config") runs that program — typically a PyTorch script —
// under `llmtrain launch` with torchrun's worker environment, queued, costed, logged, cancelled and retried
// like a training job. It runs arbitrary code, so the server takes one only when the operator enabled it
// (serve --allow-command-jobs) and only from a token whose role is runner or admin. docs/server.md
// "Command jobs", docs/security.md "Command jobs".
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "server/auth.h"
#include "server/estimate/estimate.h"
#include "server/jobs/job.h"

namespace llmt::server {

// The "command" field: 1..256 non-empty strings without NUL, each at most 4096 bytes. Throws ApiError 400
// naming command[i].
std::vector<std::string> parse_command(const nlohmann::json& command);

// Throws ApiError 403 unless the server runs command jobs (`allowed`, serve --allow-command-jobs) and
// `who` has role runner or admin; the message says which of the two is missing and how to get it.
void check_command_job_allowed(bool allowed, const Principal& who);

// A command job's estimate: nothing tells the server how fast a program runs, so the cost has an upper
// bound only when the job has max_runtime_s (duration = max_runtime_s, devices x rate); else "unmeasured"
// with a reason, as estimate.h does for a device without measurements.
nlohmann::json estimate_command_job(const JobSpec& spec, const Rates& rates);

// The job's environment additions, the variables a command job reads (core/knobs.h's locations): where it
// appends its metrics (JSON lines with an integer "step", shown like our trainer's metrics.jsonl) and where
// its files go (the job's artifacts): {LLMTRAIN_METRICS_FILE=<run dir>/metrics.jsonl,
// LLMTRAIN_OUTPUT_DIR=<run dir>}.
std::vector<std::string> command_job_env(const std::filesystem::path& run_dir);

// `llmtrain launch` arguments (after the binary) that run the job's command on one node with
// nproc_per_node workers: --no-python, so that a program called like one of our subcommands is still the
// program; --max-restarts 0, since retries are the server's attempts.
std::vector<std::string> command_job_launch_args(const JobSpec& spec);

}  // namespace llmt::server
