// Where training metrics go: metrics.jsonl in the run directory (one JSON object per logged step and
// per evaluation), and a line or a progress bar on stderr.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>

namespace llmt::train {

// Not thread-safe; owned by the trainer of rank 0.
class MetricsLog {
public:
    // Opens `path` for appending (created if absent). An empty path disables the file.
    explicit MetricsLog(const std::filesystem::path& path);
    ~MetricsLog();
    MetricsLog(const MetricsLog&) = delete;
    MetricsLog& operator=(const MetricsLog&) = delete;

    // Appends one line and flushes it (a crash loses at most the line being written), and hands the
    // record to the sink set by also_to (TensorBoard and MLflow: tracking/tracker.h).
    void write(const nlohmann::ordered_json& record);
    // Every record written from now on is also passed to `sink`, whether or not the file is enabled.
    void also_to(std::function<void(const nlohmann::ordered_json&)> sink) { sink_ = std::move(sink); }

private:
    std::FILE* f_ = nullptr;
    std::function<void(const nlohmann::ordered_json&)> sink_;
};

// Keeps only the lines of a metrics.jsonl whose "step" is <= max_step (rewritten atomically): a resumed
// run does not repeat the steps logged after its checkpoint.
void truncate_metrics_after(const std::filesystem::path& path, int64_t max_step);

}  // namespace llmt::train
