#include "tracking/tensorboard_writer.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/error.h"
#include "tracking/proto_writer.h"
#include "tracking/tfrecord.h"

namespace llmt::tracking {

namespace {

// event.proto: Event { double wall_time = 1; int64 step = 2; oneof { string file_version = 3;
// Summary summary = 5; } }. summary.proto: Summary { repeated Value value = 1; } Value { string tag = 1;
// float simple_value = 2; TensorProto tensor = 8; SummaryMetadata metadata = 9; } SummaryMetadata {
// PluginData plugin_data = 1; } PluginData { string plugin_name = 1; bytes content = 2; }.
// tensor.proto: TensorProto { DataType dtype = 1; TensorShapeProto tensor_shape = 2;
// repeated bytes string_val = 8; }, DT_STRING = 7.
enum EventField { kWallTime = 1, kStep = 2, kFileVersion = 3, kSummary = 5 };
enum ValueField { kTag = 1, kSimpleValue = 2, kTensor = 8, kMetadata = 9 };
constexpr int kSummaryValue = 1, kPluginData = 1, kPluginName = 1;
constexpr int kTensorDtype = 1, kTensorShape = 2, kTensorStringVal = 8, kDtString = 7;

ProtoWriter event_head(int64_t step, double wall_time) {
    ProtoWriter e;
    e.fixed64_double(kWallTime, wall_time);
    if (step != 0) e.varint(kStep, static_cast<uint64_t>(step));  // proto3: a zero is not written
    return e;
}

std::string host_name() {
    char buf[256] = {};
    if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
    return buf;
}

}  // namespace

std::string file_version_event(double wall_time) {
    ProtoWriter e = event_head(0, wall_time);
    e.bytes(kFileVersion, "brain.Event:2");
    return e.data();
}

std::string scalars_event(int64_t step, double wall_time, const std::vector<std::pair<std::string, double>>& values) {
    ProtoWriter summary;
    for (const auto& [tag, value] : values) {
        ProtoWriter v;
        v.bytes(kTag, tag);
        v.fixed32_float(kSimpleValue, static_cast<float>(value));  // simple_value is a float in the proto
        summary.message(kSummaryValue, v);
    }
    ProtoWriter e = event_head(step, wall_time);
    e.message(kSummary, summary);
    return e.data();
}

std::string text_event(int64_t step, double wall_time, const std::string& tag, const std::string& text) {
    ProtoWriter plugin;
    plugin.bytes(kPluginName, "text");
    ProtoWriter metadata;
    metadata.message(kPluginData, plugin);
    ProtoWriter tensor;
    tensor.varint(kTensorDtype, kDtString);
    tensor.message(kTensorShape, ProtoWriter());  // a scalar: no dims
    tensor.bytes(kTensorStringVal, text);
    ProtoWriter v;
    v.bytes(kTag, tag);
    v.message(kTensor, tensor);
    v.message(kMetadata, metadata);
    ProtoWriter summary;
    summary.message(kSummaryValue, v);
    ProtoWriter e = event_head(step, wall_time);
    e.message(kSummary, summary);
    return e.data();
}

TensorBoardWriter::TensorBoardWriter(const std::filesystem::path& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw IoError(fmt::format("cannot create the TensorBoard directory '{}': {}", dir.string(), ec.message()));
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    const std::string base = fmt::format("events.out.tfevents.{}.{}",
                                         std::chrono::duration_cast<std::chrono::seconds>(now).count(), host_name());
    for (int n = 0; n < 1000 && !f_; ++n) {
        path_ = dir / (n == 0 ? base : fmt::format("{}.{}", base, n));
        const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno == EEXIST) continue;
        if (fd < 0) throw IoError(fmt::format("cannot create '{}': {}", path_.string(), std::strerror(errno)));
        f_ = ::fdopen(fd, "wb");
    }
    if (!f_) throw IoError(fmt::format("cannot create an event file in '{}'", dir.string()));
    write_event(file_version_event(std::chrono::duration<double>(now).count()));
    flush();
}

TensorBoardWriter::~TensorBoardWriter() {
    if (f_) std::fclose(f_);
}

void TensorBoardWriter::write_event(const std::string& event) {
    const std::string rec = tfrecord_frame(event);
    if (std::fwrite(rec.data(), 1, rec.size(), f_) != rec.size())
        throw IoError(fmt::format("cannot write to '{}': {}", path_.string(), std::strerror(errno)));
}

void TensorBoardWriter::write_scalars(int64_t step, double wall_time,
                                      const std::vector<std::pair<std::string, double>>& values) {
    write_event(scalars_event(step, wall_time, values));
}

void TensorBoardWriter::write_text(int64_t step, double wall_time, const std::string& tag, const std::string& text) {
    write_event(text_event(step, wall_time, tag, text));
}

void TensorBoardWriter::flush() {
    if (std::fflush(f_) != 0)
        throw IoError(fmt::format("cannot write to '{}': {}", path_.string(), std::strerror(errno)));
}

}  // namespace llmt::tracking
