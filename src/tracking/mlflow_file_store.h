// MLflow's file store (the `mlruns/` layout of mlflow/store/tracking/file_store.py), written directly:
//   <root>/<experiment_id>/meta.yaml             experiment: name, id, artifact_location, lifecycle_stage
//   <root>/<experiment_id>/<run_id>/meta.yaml    run info: status (1 RUNNING .. 5 KILLED), times, name
//   <root>/<experiment_id>/<run_id>/metrics/<key>   one "<timestamp_ms> <value> <step>" line per point
//   <root>/<experiment_id>/<run_id>/params/<key>    the value, no newline (params are immutable)
//   <root>/<experiment_id>/<run_id>/tags/<key>      the value, no newline
// A new root gets the "Default" experiment 0 and `.trash/`, as FileStore creates them. Experiments are
// found and created under an flock on <root>/.llmtrain.lock (several runs may share a volume).
// docs/tracking.md.
#pragma once

#include <filesystem>

#include "tracking/mlflow_store.h"

namespace llmt::tracking {

class MlflowFileStore final : public MlflowStore {
public:
    // `root`: the directory (made absolute); created on first use. Throws nothing.
    explicit MlflowFileStore(const std::filesystem::path& root);

    // Each throws IoError (disk), or std::invalid_argument for a key MLflow would refuse (a permanent
    // error: the sink logs it and goes on).
    std::string experiment_id(const std::string& name) override;
    std::string create_run(const std::string& experiment_id, const std::string& run_name, int64_t start_ms,
                           const std::vector<KeyValue>& tags) override;
    bool has_run(const std::string& run_id) override;
    void log_batch(const std::string& run_id, const LogBatch& batch) override;
    void update_run(const std::string& run_id, RunStatus status, int64_t end_ms) override;
    std::string describe() const override;

private:
    std::filesystem::path run_dir(const std::string& run_id);  // throws if unknown
    void ensure_root();
    std::filesystem::path root_;
};

// "file:///a/b" for "/a/b" (percent-encoding the few characters a URI path cannot hold).
std::string file_uri_of(const std::filesystem::path& absolute);

}  // namespace llmt::tracking
