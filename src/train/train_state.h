// The trainer's fields of a checkpoint's state.json (docs/formats/checkpoint.md), each read with its
// expected type: a hand-edited or damaged state.json is bad input (exit 2) naming the field and the
// file, never an internal error from a JSON type mismatch deep in the resume path.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>

namespace llmt::train {

struct TrainState {
    std::int64_t step = 0;                // >= 0
    std::int64_t tokens = 0;              // >= 0; absent in early checkpoints: 0
    nlohmann::json loader;                // object, DataLoader::state() (its restore checks the inside)
    std::optional<double> best_val_loss;  // number or null
    int world_size = 1;                   // >= 1; absent: 1
    int zero_stage = 0;                   // 0, 1 or 3; absent: 0
    double wall_s = 0;                    // >= 0; absent: 0
    nlohmann::json config;                // object: the resolved config of the run
};

// Throws CheckpointError "'<file>': field \"<name>\" must be <expected>, found <type or value>" for a
// missing required field (step, loader, config) or any field of the wrong type or range.
TrainState parse_train_state(const nlohmann::json& state, const std::filesystem::path& file);

}  // namespace llmt::train
