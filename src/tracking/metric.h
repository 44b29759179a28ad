// One metric point as MLflow and TensorBoard take it, and the conversion from a metrics.jsonl record
// (train/metrics.h): every numeric field but "step" is a metric of that step, named as in the record.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace llmt::tracking {

struct Metric {
    std::string key;       // "loss", "val_loss", "lr", ...
    double value = 0;
    int64_t step = 0;
    int64_t timestamp_ms = 0;  // wall clock, milliseconds since the epoch
};

// The metrics of one record ({"step": 10, "loss": 2.3, "lr": 1e-3, ...}); non-numeric fields are
// skipped. A record without an integer "step" gives none.
std::vector<Metric> metrics_of(const nlohmann::ordered_json& record, int64_t timestamp_ms);

int64_t now_ms();

}  // namespace llmt::tracking
