// train/best_metric.h.
#include "train/best_metric.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"

namespace llmt::train {

bool BestMetric::offer(double value) {
    if (!std::isfinite(value)) return false;
    const bool better = !value_ || (higher_ ? value > *value_ : value < *value_);
    if (better) value_ = value;
    return better;
}

nlohmann::json BestMetric::to_json() const { return value_ ? nlohmann::json(*value_) : nlohmann::json(); }

void BestMetric::restore(const nlohmann::json& state, const std::filesystem::path& file) {
    value_.reset();
    const auto it = state.find(key());
    if (it == state.end() || it->is_null()) return;
    if (!it->is_number())
        throw CheckpointError(fmt::format("'{}': field \"{}\" must be a number or null, found {}", file.string(),
                                          key(), it->type_name()));
    value_ = it->get<double>();
}

}  // namespace llmt::train
