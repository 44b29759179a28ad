// Config checks of the data section: the data.* keys each data.source reads (a key its source never reads is
// refused at a non-default value, so nothing is silently ignored) and what a training run's data must name.
// The loader adds each problem at the place the user wrote the key it names.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace llmt::config {

// The data.* keys that `data.source: source` with `trainer.precision: precision` never reads (a non-default
// value there is refused), with the sources that do read each. data.cache_dir also holds a language model's
// CPU precision probe (train/cpu_precision.h), read with precision auto or bf16.
std::vector<std::pair<std::string, std::string>> unread_data_keys(const std::string& source,
                                                                  const std::string& precision = "fp32");

// A problem of the data a training run reads: the key to fix, the key whose value shows it (where the
// message points), the message.
struct DataProblem {
    std::string key, located_at, message;
};

// The data a training run reads must be named: train shards (and val shards when evaluating) or paths; a
// chat run needs a tokenizer with a chat template and a model with rotary positions. `r`: a resolved config.
std::vector<DataProblem> training_data_problems(const nlohmann::ordered_json& r);

}  // namespace llmt::config
