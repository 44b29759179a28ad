// The MLflow side of tracking: a worker thread that owns an MlflowStore and delivers what the trainer
// logs, so the training loop never waits on a disk or a server. Nothing is dropped while the run lives:
// metrics queue in memory while the store is unreachable (TransientError), and the worker retries with
// exponential backoff (1 s doubling to 30 s), a warning when delivery stops and a note when it resumes.
// A permanent refusal (a 400) drops that one request with a warning. finish() delivers the rest and
// the final status within a deadline. docs/tracking.md.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "tracking/mlflow_store.h"

namespace llmt::tracking {

struct MlflowRunSpec {
    std::string experiment;  // name
    std::string run_name;
    std::vector<KeyValue> params;  // logged when the run is created (not again on resume: params are immutable)
    std::vector<KeyValue> tags;
    std::string resume_run_id;     // non-empty: continue this run if the store still has it
    // Called on the worker thread once the run exists (to record its id in the run directory).
    std::function<void(const std::string& experiment_id, const std::string& run_id)> on_started;
    std::function<void(const std::string&)> warn;  // messages for the user; default: stderr
    double backoff_first_s = 1, backoff_max_s = 30;
};

// Thread-safe: log() and finish() may be called from any thread (the trainer calls them from one).
class MlflowSink {
public:
    MlflowSink(std::unique_ptr<MlflowStore> store, MlflowRunSpec spec);
    ~MlflowSink();  // finish(kFailed, 30) if finish was not called
    MlflowSink(const MlflowSink&) = delete;
    MlflowSink& operator=(const MlflowSink&) = delete;

    // Queues the points; returns at once.
    void log(std::vector<Metric> metrics);
    // Delivers everything queued, then sets `status` and the end time; waits at most timeout_s. Returns the
    // number of metric points not delivered (0 on success). Idempotent: a second call returns 0.
    size_t finish(RunStatus status, double timeout_s);

    std::string run_id() const;

private:
    void work();
    bool start_run();
    // Runs `op` until it succeeds (true), is refused for good (false, warned), or the sink is abandoned.
    bool with_retry(const std::string& what, const std::function<void()>& op);
    void warn(const std::string& msg) const;

    std::unique_ptr<MlflowStore> store_;
    MlflowRunSpec spec_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::vector<Metric> pending_;
    std::string run_id_;
    bool finishing_ = false, abandoned_ = false, done_ = false, finished_called_ = false;
    RunStatus status_ = RunStatus::kFinished;
    int64_t end_ms_ = -1;
    size_t dropped_ = 0;
    std::thread worker_;
};

}  // namespace llmt::tracking
