// Duration and cost estimates of a job from measured throughput (server/estimate/throughput.h): returned at
// submit, by POST /v1/estimate and by `llmtrain estimate`, and checked against budgets. Every estimate
// names the rows it used; with no row for the job's device it says so and has no duration or cost.
// docs/server.md "Estimates".
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>

#include "config/config.h"
#include "server/jobs/job.h"
#include "server/estimate/throughput.h"

namespace llmt::server {

// USD per device-hour, from --rates-file (JSON: {"cpu_hour_usd": 0.05, "gpu_hour_usd": 2.5}).
struct Rates {
    double cpu_hour_usd = 0;
    double gpu_hour_usd = 0;
};
// Throws InputError naming the file and key for a malformed or unknown entry.
Rates load_rates(const std::filesystem::path& path);

// The job at its own world size (nodes x nproc_per_node ranks, one GPU each when gpus_per_node > 0):
// {"source": "measured" | "unmeasured", "tokens", "max_steps", "world_size", "device", "card",
//  "tokens_per_s", "efficiency", "duration_s", "device_hours", "cost_usd", "basis": {...}, "rows_used"}.
// "unmeasured" estimates carry "reason" and null duration_s / device_hours / cost_usd.
nlohmann::json estimate_job(const JobSpec& spec, const config::Config& cfg, const Rates& rates,
                            const ThroughputTable& table);

// The same total tokens as the job at world sizes 1..max_world: [{world_size, tokens_per_s, efficiency,
// speedup, duration_s, device_hours, cost_usd}], plus the rows used and the basis of each figure.
nlohmann::json estimate_scaling(const JobSpec& spec, const config::Config& cfg, const Rates& rates,
                                const ThroughputTable& table, int max_world);

}  // namespace llmt::server
