// What the scheduler admits against: machine capacity (--capacity cpus=N,gpus=M), per-label quotas
// (--quotas-file, JSON: {"team=nlp": {"max_running": 2, "max_cpus": 4, "max_gpus": 0, "budget_usd": 50,
// "max_disk_mb": 20480}}) and per-submitter quotas beside them in the same file ({"submitter:bob":
// {"max_queued": 50, "max_running": 2, "max_disk_mb": 10240}}, "submitter:*" for every submitter without
// its own entry; by default 1,000 waiting jobs each and no limit on running ones or their disk). A job is admitted
// whole (all ranks' CPU slots and GPUs) or not at all.
#pragma once

#include <cstdint>
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
    int64_t max_disk_mb = -1;  // disk of the label's running jobs together (checked while they run: disk_usage.h)
};
// Limits for the jobs of one submitter (a token's name). Negative = unlimited.
struct SubmitterQuota {
    static constexpr int kDefaultMaxQueued = 1000;
    int max_queued = kDefaultMaxQueued;  // jobs waiting (queued or retrying); past it submits get 429
    int max_running = -1;                // jobs running at once
    int64_t max_disk_mb = -1;            // disk of the submitter's running jobs together (disk_usage.h)
};

struct Quotas {
    std::map<std::string, LabelQuota> labels;         // "key=value" -> quota
    std::map<std::string, SubmitterQuota> submitters;  // name -> quota ("submitter:NAME" in the file)
    SubmitterQuota any_submitter;                      // "submitter:*", else the defaults
    const SubmitterQuota& of_submitter(const std::string& name) const {
        auto it = submitters.find(name);
        return it == submitters.end() ? any_submitter : it->second;
    }
};
// Throws InputError naming the file and key for malformed entries.
Quotas load_quotas(const std::filesystem::path& path);

}  // namespace llmt::server
