// Cost and duration estimate of a job, returned at submit and by POST /v1/estimate and checked
// against budgets. PLACEHOLDER: estimate_job() below is a documented rule of thumb (docs/server.md
// "Estimates"), marked source="placeholder" in every response; the measured-rows estimator of the
// control-plane issue replaces this file without touching its callers.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>

#include "config/config.h"
#include "server/job.h"

namespace llmt::server {

// USD per device-hour, from --rates-file (JSON: {"cpu_hour_usd": 0.05, "gpu_hour_usd": 2.5}).
struct Rates {
    double cpu_hour_usd = 0;
    double gpu_hour_usd = 0;
};
// Throws InputError naming the file and key for a malformed or unknown entry.
Rates load_rates(const std::filesystem::path& path);

// {"source", "tokens", "duration_s", "device_hours", "cost_usd", "world_size", "assumptions"}.
nlohmann::json estimate_job(const JobSpec& spec, const config::Config& cfg, const Rates& rates);

}  // namespace llmt::server
