#include "server/estimate/estimate_history.h"

#include <fmt/format.h>

#include <algorithm>

#include "server/jobs/store.h"

namespace llmt::server {

std::optional<double> actual_to_estimate(const JobRecord& j) {
    if (j.state != JobState::kSucceeded || j.started_at <= 0 || j.finished_at < j.started_at) return std::nullopt;
    const nlohmann::json& e = j.estimate;
    // The duration before any correction: ratios must not compound through earlier corrections.
    const char* key = e.contains("uncorrected_duration_s") ? "uncorrected_duration_s" : "duration_s";
    if (!e.is_object() || !e.contains(key) || !e[key].is_number()) return std::nullopt;
    const double est = e[key].get<double>();
    if (!(est > 0)) return std::nullopt;
    return (j.finished_at - j.started_at) / est;
}

EstimateHistory estimate_history(JobStore& store, const std::string& device, const std::string& workload,
                                 size_t max_jobs) {
    EstimateHistory h{device, {}};
    std::vector<JobRecord> done = store.in_state(JobState::kSucceeded);
    std::sort(done.begin(), done.end(),
              [](const JobRecord& a, const JobRecord& b) { return a.finished_at > b.finished_at; });
    for (const JobRecord& j : done) {
        if (h.ratios.size() >= max_jobs) break;
        if (j.estimate.value("device", std::string()) != device) continue;
        if (j.estimate.value("workload", std::string()) != workload) continue;
        if (auto r = actual_to_estimate(j)) h.ratios.push_back(*r);
    }
    return h;
}

namespace {

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

void apply_history(nlohmann::json& e, const EstimateHistory& h) {
    if (e.value("source", std::string()) != "measured" || !e["duration_s"].is_number()) return;
    const double raw = e["duration_s"];
    if (h.ratios.empty()) {
        e["correction"] = {{"factor", 1.0}, {"jobs", 0},
                           {"basis", fmt::format("no finished {} job yet to compare an estimate with", h.device)}};
        e["duration_range_s"] = {raw, raw};
        return;
    }
    const double factor = median(h.ratios);
    const auto [lo, hi] = std::minmax_element(h.ratios.begin(), h.ratios.end());
    e["uncorrected_duration_s"] = raw;
    e["duration_s"] = raw * factor;
    e["duration_range_s"] = {raw * *lo, raw * *hi};
    if (e["device_hours"].is_number()) e["device_hours"] = e["device_hours"].get<double>() * factor;
    if (e["cost_usd"].is_number()) e["cost_usd"] = e["cost_usd"].get<double>() * factor;
    e["correction"] = {{"factor", factor},
                       {"jobs", h.ratios.size()},
                       {"min_ratio", *lo},
                       {"max_ratio", *hi},
                       {"basis", fmt::format("median of actual/estimated duration over the last {} succeeded {} job{}",
                                             h.ratios.size(), h.device, h.ratios.size() == 1 ? "" : "s")}};
}

}  // namespace llmt::server
