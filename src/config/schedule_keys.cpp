#include "config/schedule_keys.h"

#include <fmt/format.h>

namespace llmt::config {

std::optional<std::string> clamp_warmup_to_run(nlohmann::ordered_json& resolved, const std::string& where) {
    auto& t = resolved["trainer"];
    // With trainer.epochs the run's length comes from the data: the trainer clamps against that instead.
    if (t.contains("epochs") && t["epochs"].is_number_integer() && t["epochs"].get<int64_t>() > 0) return std::nullopt;
    const auto warmup = t["warmup_steps"].get<int64_t>(), max_steps = t["max_steps"].get<int64_t>();
    if (warmup <= max_steps) return std::nullopt;
    t["warmup_steps"] = max_steps;
    return fmt::format("trainer.warmup_steps ({}, {}) is longer than the run (trainer.max_steps {}): shortened to {} "
                       "steps, so the learning rate reaches trainer.lr at the last step",
                       warmup, where, max_steps, max_steps);
}

}  // namespace llmt::config
