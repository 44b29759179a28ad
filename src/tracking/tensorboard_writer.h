// A TensorBoard event file (docs/tracking.md): `events.out.tfevents.<unix time>.<host>` in the run's
// log directory, TFRecord-framed (tracking/tfrecord.h) Event protos: first `file_version:
// "brain.Event:2"`, then scalar summaries (Summary.Value.simple_value) and text summaries (the text
// plugin's DT_STRING tensor). Field numbers follow tensorflow/core/util/event.proto and
// tensorflow/core/framework/summary.proto, tensor.proto.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace llmt::tracking {

// Not thread-safe: one owner (the TensorBoard sink's worker thread).
class TensorBoardWriter {
public:
    // Creates `dir` and a new event file in it (a restarted run adds a file beside the old ones; a name
    // taken within the same second gets a ".<n>" suffix) and writes the file_version record.
    // Throws IoError.
    explicit TensorBoardWriter(const std::filesystem::path& dir);
    ~TensorBoardWriter();
    TensorBoardWriter(const TensorBoardWriter&) = delete;
    TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

    // One Event holding one simple_value per (tag, value); wall_time in seconds since the epoch.
    void write_scalars(int64_t step, double wall_time, const std::vector<std::pair<std::string, double>>& values);
    // One Event holding a text-plugin summary (shown under TensorBoard's Text tab).
    void write_text(int64_t step, double wall_time, const std::string& tag, const std::string& text);
    // Pushes written records to the file (fflush): TensorBoard sees them on its next poll. Throws IoError.
    void flush();

    const std::filesystem::path& path() const { return path_; }

private:
    void write_event(const std::string& event);
    std::filesystem::path path_;
    std::FILE* f_ = nullptr;
};

// The Event protos, exposed for tests.
std::string file_version_event(double wall_time);
std::string scalars_event(int64_t step, double wall_time, const std::vector<std::pair<std::string, double>>& values);
std::string text_event(int64_t step, double wall_time, const std::string& tag, const std::string& text);

}  // namespace llmt::tracking
