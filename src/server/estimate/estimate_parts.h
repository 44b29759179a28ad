// Pieces every estimate (estimate.cpp for language models, estimate_classifier.cpp for image
// classifiers) words the same way: the cost from device-hours and the rows it names.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "server/estimate/estimate.h"

namespace llmt::server {

// No rate for the device: the cost is unknown (null), never $0.
nlohmann::json cost_or_null(double device_hours, double rate);
// How the cost was obtained (or why there is none), naming the --rates-file key.
std::string cost_basis(bool gpu, const Rates& rates);
// The table's rows at these 1-based lines, as JSON.
nlohmann::json rows_json(const ThroughputTable& table, const std::vector<int>& lines);

}  // namespace llmt::server
