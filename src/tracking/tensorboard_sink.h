// The TensorBoard side of tracking: a worker thread that owns a TensorBoardWriter, so a slow or full
// disk never holds up a training step. Each logged record becomes one Event of scalars, flushed at
// once; an I/O error is one warning and ends TensorBoard output for the run (never the run itself).
#pragma once

#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace llmt::tracking {

// Thread-safe.
class TensorBoardSink {
public:
    // Starts the worker, which creates the event file in `dir` and writes `config_text` as the "config"
    // text summary at `step`.
    TensorBoardSink(std::filesystem::path dir, std::string config_text, int64_t step,
                    std::function<void(const std::string&)> warn = {});
    ~TensorBoardSink();  // finish()
    TensorBoardSink(const TensorBoardSink&) = delete;
    TensorBoardSink& operator=(const TensorBoardSink&) = delete;

    void log(int64_t step, double wall_time, std::vector<std::pair<std::string, double>> scalars);
    // Writes what is queued and closes the file (local writes: no deadline).
    void finish();

private:
    void work(const std::filesystem::path& dir, const std::string& config_text, int64_t step);
    struct Item {
        int64_t step;
        double wall_time;
        std::vector<std::pair<std::string, double>> scalars;
    };
    std::function<void(const std::string&)> warn_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<Item> queue_;
    bool finishing_ = false, done_ = false;
    std::thread worker_;
};

}  // namespace llmt::tracking
