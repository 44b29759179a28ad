// What the scheduler admits against: machine capacity (--capacity cpus=N,gpus=M) and per-label quotas
// (--quotas-file, JSON: {"team=nlp": {"max_running": 2, "max_cpus": 4, "max_gpus": 0, "budget_usd": 50}}).
// A job is admitted whole (all ranks' CPU slots and GPUs) or not at all.
#pragma once

#include <filesystem>
#include <map>
#include <string>

namespace llmt::server {

struct Capacity {
    int cpus = 2;
    int gpus = 0;
    // A queue that admits nothing (cpus=0, gpus=0): jobs are accepted and wait. Used to drain a
    // machine and by the load test.
    bool holds_everything() const { return cpus == 0 && gpus == 0; }
};
// "cpus=2,gpus=0" (either key may be left out). Throws InputError naming the bad part.
Capacity parse_capacity(const std::string& text);

// Limits for jobs carrying one label (key=value). Negative = unlimited.
struct LabelQuota {
    int max_running = -1;   // jobs running at once
    int max_cpus = -1;      // CPU slots in use at once
    int max_gpus = -1;      // GPUs in use at once
    double budget_usd = -1;  // total estimated cost of the label's jobs (checked at submit)
};
using Quotas = std::map<std::string, LabelQuota>;  // "key=value" -> quota
// Throws InputError naming the file and key for malformed entries.
Quotas load_quotas(const std::filesystem::path& path);

}  // namespace llmt::server
