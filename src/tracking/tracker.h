// Results where users already look (docs/tracking.md): the trainer's one handle on TensorBoard
// and MLflow. Built from the config on every rank, active on rank 0 only; each metrics.jsonl record
// goes to the sinks the config asks for (tracking.tensorboard_dir, tracking.mlflow.uri or
// $MLFLOW_TRACKING_URI), each on its own worker thread, so log() never waits on a disk or a server.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <memory>
#include <string>

namespace llmt::config {
struct Config;
}

namespace llmt::tracking {

class MlflowSink;
class TensorBoardSink;

// The file in the run directory that records the MLflow run, so a resumed run continues it.
inline constexpr const char* kMlflowRunFile = "mlflow_run.json";

struct TrackerOptions {
    double finish_timeout_s = 60;  // how long the run's end waits for an unreachable tracking server
    double backoff_first_s = 1, backoff_max_s = 30;
};

// Thread-safe log(); finish() once, from the trainer.
class Tracker {
public:
    // rank != 0: inert. Throws ConfigError when $MLFLOW_TRACKING_URI (used because tracking.mlflow.uri is
    // empty) has a scheme this version does not speak. `start_step`: the step the run starts (or resumes) at.
    Tracker(const config::Config& cfg, const std::filesystem::path& run_dir, const std::string& run_id, int rank,
            int64_t start_step, TrackerOptions opts = {});
    ~Tracker();  // finish(1) (FAILED) if finish was not called: an exception is unwinding the trainer
    Tracker(const Tracker&) = delete;
    Tracker& operator=(const Tracker&) = delete;

    // One metrics.jsonl record ({"step": ..., "loss": ..., ...}).
    void log(const nlohmann::ordered_json& record);
    // The run's end: exit_code 0 FINISHED, 128+signal KILLED (SIGTERM/SIGINT), other FAILED. Waits for the
    // sinks (at most finish_timeout_s for MLflow).
    void finish(int exit_code);

    bool active() const { return tb_ || mlflow_; }

private:
    TrackerOptions opts_;
    std::unique_ptr<TensorBoardSink> tb_;
    std::unique_ptr<MlflowSink> mlflow_;
    bool finished_ = false;
};

// The MLflow URI a config uses: tracking.mlflow.uri, else $MLFLOW_TRACKING_URI, else "" (off).
std::string mlflow_uri(const config::Config& cfg);

}  // namespace llmt::tracking
