// What the MLflow sink needs from a tracking store, with two implementations: the file store
// (tracking/mlflow_file_store.h, a local `mlruns/` directory) and the REST API 2.0 of a tracking server
// (tracking/mlflow_rest_store.h). docs/tracking.md.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tracking/metric.h"

namespace llmt::tracking {

using KeyValue = std::pair<std::string, std::string>;

// MLflow's RunStatus names (mlflow/protos/service.proto).
enum class RunStatus { kRunning, kFinished, kFailed, kKilled };
const char* run_status_name(RunStatus s);  // "RUNNING", "FINISHED", ...

// A failure that may pass (server down, 5xx, 429, a timeout): the sink retries it with backoff.
class TransientError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};
// Any other std::exception from a store is permanent for that request (a 400: retrying cannot help).

// One log-batch request's worth (REST limits: tracking/mlflow_batches.h).
struct LogBatch {
    std::vector<Metric> metrics;
    std::vector<KeyValue> params;
    std::vector<KeyValue> tags;
};

// Used by one thread (the sink's worker).
class MlflowStore {
public:
    virtual ~MlflowStore() = default;
    // The id of the active experiment `name`, created if absent.
    virtual std::string experiment_id(const std::string& name) = 0;
    // A new RUNNING run; returns its id.
    virtual std::string create_run(const std::string& experiment_id, const std::string& run_name, int64_t start_ms,
                                   const std::vector<KeyValue>& tags) = 0;
    // Whether run `run_id` exists in this store (resume).
    virtual bool has_run(const std::string& run_id) = 0;
    virtual void log_batch(const std::string& run_id, const LogBatch& batch) = 0;
    // end_ms < 0: no end time (a resumed run set RUNNING again).
    virtual void update_run(const std::string& run_id, RunStatus status, int64_t end_ms) = 0;
    // "file store /shared/mlruns", "tracking server https://mlflow.example" for messages.
    virtual std::string describe() const = 0;
};

}  // namespace llmt::tracking
