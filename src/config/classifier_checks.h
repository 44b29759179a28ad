// Config checks of the image-classification workload (model.arch mlp | cnn, data.source idx): which keys
// each side reads, list values, the pairing of arch and source. Kept apart from the loader's other
// checks; the loader adds each problem with where the key was written.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace llmt::config {

struct KeyProblem {
    std::string key;
    std::string message;
};

// Problems of a resolved config (every key present). `training`: the data must fit the model.
std::vector<KeyProblem> classifier_problems(const nlohmann::ordered_json& r, bool training);

// data.* keys only data.source idx reads (refused with another source when not at their defaults).
const std::vector<std::string>& idx_only_data_keys();

}  // namespace llmt::config
