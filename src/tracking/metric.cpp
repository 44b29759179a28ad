#include "tracking/metric.h"

#include <chrono>

namespace llmt::tracking {

std::vector<Metric> metrics_of(const nlohmann::ordered_json& record, int64_t timestamp_ms) {
    std::vector<Metric> out;
    if (!record.is_object() || !record.contains("step") || !record["step"].is_number_integer()) return out;
    const int64_t step = record["step"].get<int64_t>();
    for (auto it = record.begin(); it != record.end(); ++it) {
        if (it.key() == "step" || !it.value().is_number()) continue;
        out.push_back({it.key(), it.value().get<double>(), step, timestamp_ms});
    }
    return out;
}

int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

}  // namespace llmt::tracking
