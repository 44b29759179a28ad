// Helpers the job route files share: look a job up (404 otherwise), its run directory, its summary JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>

#include "server/jobs/job.h"

namespace llmt::server {

struct ServerContext;

// Throws ApiError 404 when there is no such job.
JobRecord require_job(ServerContext& ctx, int64_t id);
// <data-dir>/jobs/<id>/runs/job-<id>: the trainer's run directory (metrics.jsonl, checkpoints/, ...).
std::filesystem::path job_run_dir(const ServerContext& ctx, int64_t id);
nlohmann::json job_summary(const JobRecord& j);

}  // namespace llmt::server
