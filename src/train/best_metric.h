// The rule that keeps checkpoints/best, in one place: a task's metric (train/task.h), whether higher is
// better, and the best value so far. It is restored on resume from the checkpoint's state.json, so a
// resumed run keeps the best of the whole run. Not thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>

namespace llmt::train {

class BestMetric {
public:
    // `name`: the metric's field in metrics.jsonl ("val_loss", "val_accuracy").
    BestMetric(std::string name, bool higher_is_better) : name_(std::move(name)), higher_(higher_is_better) {}

    // Whether `value` beats the best so far; it then becomes the best. Any finite value beats none; a value
    // that is not finite (a diverged loss, an accuracy over no images) never counts; ties do not improve.
    bool offer(double value);

    const std::optional<double>& value() const { return value_; }
    const std::string& name() const { return name_; }
    // "best_" + name: its field in metrics.jsonl, summary.json and a checkpoint's state.json.
    std::string key() const { return "best_" + name_; }
    // The value, or null when there is none.
    nlohmann::json to_json() const;

    // From a checkpoint's state.json: key() absent or null is none, a number the best so far. Throws
    // CheckpointError naming `file` and the field for anything else.
    void restore(const nlohmann::json& state, const std::filesystem::path& file);

private:
    std::string name_;
    bool higher_;
    std::optional<double> value_;
};

}  // namespace llmt::train
