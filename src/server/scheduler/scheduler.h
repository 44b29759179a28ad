// The scheduler thread: admits waiting jobs (priority, then submission order; gang admission against
// capacity and label quotas), watches running attempts (exit, cancel, max_runtime_s, disk quotas), decides retries,
// and on start reconciles the jobs a previous server process left running. docs/server.md "States".
#pragma once

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <optional>
#include <mutex>
#include <thread>

#include "server/scheduler/admission.h"
#include "server/scheduler/disk_usage.h"
#include "server/scheduler/executor.h"
#include "server/jobs/job_access.h"
#include "server/jobs/store.h"

namespace llmt::server {

struct SchedulerOptions {
    std::filesystem::path data_dir;   // jobs live in <data_dir>/jobs/<id>/
    Capacity capacity;
    Quotas quotas;
    double kill_grace_s = 30;        // SIGTERM -> SIGKILL
    double tick_s = 0.25;
    JobAccessPolicy access;          // checked again when an attempt starts (server/jobs/job_access.h)
    // Disk: each running job's directory is measured every disk_check_s; past max_job_disk_mb (0: no
    // per-job limit) or its submitter's or a label's max_disk_mb it is stopped (server/scheduler/disk_usage.h).
    int64_t max_job_disk_mb = kDefaultMaxJobDiskMb;
    double disk_check_s = 10;
};

// The one writer of running jobs' states besides cancel requests. Thread-safe: wake() from any thread.
class Scheduler {
public:
    Scheduler(JobStore& store, Executor& exec, SchedulerOptions opts);
    ~Scheduler();

    // Reconciles jobs left running by a previous server process, then starts the thread.
    void start();
    void stop();
    void wake();
    // One pass (reconcile-free): exposed for tests that drive the scheduler by hand.
    void tick();

    static std::filesystem::path job_dir(const std::filesystem::path& data_dir, int64_t id);

private:
    void reconcile();
    void watch(const JobRecord& j, double now);
    void check_disk(const std::vector<JobRecord>& running, double now);
    void finish(const JobRecord& j, const AttemptStatus& st);
    void note_estimate_ratio(JobRecord j, JobState to);
    void admit();
    void start_attempt(const JobRecord& j);
    bool quota_allows(const JobRecord& j, const std::vector<JobRecord>& running) const;

    JobStore& store_;
    Executor& exec_;
    SchedulerOptions opts_;
    std::thread thread_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool stop_ = false, woken_ = false;
    // The scheduler thread's: waiting jobs parsed once, by id, and the store generation admit() last
    // decided at (a tick with the store unchanged admits nothing and reads no waiting row).
    std::map<int64_t, JobRecord> waiting_;
    std::optional<uint64_t> admitted_generation_;
    double disk_checked_at_ = 0;
};

}  // namespace llmt::server
