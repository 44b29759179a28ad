// How far estimates were off: each finished job keeps the ratio of its actual duration (its last
// attempt, started to finished) to the duration estimated at submit, and later estimates on the same
// device are corrected by the median of the recent ratios, with their spread as the range.
// docs/server.md "Estimates".
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "server/jobs/job.h"

namespace llmt::server {

class JobStore;

// actual / estimated duration of a succeeded job with a measured estimate; nullopt otherwise.
std::optional<double> actual_to_estimate(const JobRecord& j);

// The ratios of the last `max_jobs` succeeded jobs whose estimate was for `device` and `workload` (the
// estimate's "workload": "" for a language model, "image_classifier"), newest first: a classifier run's
// fixed costs (loading the images, the test-set evaluation) are not a language model's.
struct EstimateHistory {
    std::string device;
    std::vector<double> ratios;
};
EstimateHistory estimate_history(JobStore& store, const std::string& device, const std::string& workload = "",
                                 size_t max_jobs = 20);

// A measured estimate (estimate_job) corrected by the history: "duration_s" and "cost_usd" scaled by the
// median ratio, "duration_range_s" [low, high] from the smallest and largest ratio, the raw figure kept
// as "uncorrected_duration_s", and "correction": {factor, jobs, min_ratio, max_ratio, basis}. With no
// history: "correction" says none and the range is the estimate itself. Unmeasured estimates unchanged.
void apply_history(nlohmann::json& estimate, const EstimateHistory& h);

}  // namespace llmt::server
