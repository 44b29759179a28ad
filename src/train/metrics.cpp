#include "train/metrics.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "core/error.h"
#include "core/fs.h"
#include "core/json_parse.h"

namespace llmt::train {

MetricsLog::MetricsLog(const std::filesystem::path& path) {
    if (path.empty()) return;
    f_ = std::fopen(path.c_str(), "a");
    if (!f_) throw IoError(fmt::format("cannot open '{}' for appending: {}", path.string(), std::strerror(errno)));
}

MetricsLog::~MetricsLog() {
    if (f_) std::fclose(f_);
}

void MetricsLog::write(const nlohmann::ordered_json& record) {
    if (sink_) sink_(record);
    if (!f_) return;
    std::string line = record.dump() + "\n";
    std::fwrite(line.data(), 1, line.size(), f_);
    std::fflush(f_);
}

void truncate_metrics_after(const std::filesystem::path& path, int64_t max_step) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return;
    std::istringstream in(read_file(path));
    std::string line, kept;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        auto j = try_parse_json(line);
        if (!j) continue;  // a torn last line from a crash
        if (j->contains("step") && (*j)["step"].is_number_integer() && (*j)["step"].get<int64_t>() > max_step)
            continue;
        kept += line + "\n";
    }
    write_file_atomic(path, kept);
}

}  // namespace llmt::train
