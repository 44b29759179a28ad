#include "config/schedule_keys.h"

#include <fmt/format.h>

namespace llmt::config {

std::optional<std::string> clamp_warmup_to_run(nlohmann::ordered_json& resolved, const std::string& where) {
    auto& t = resolved["trainer"];
    const auto warmup = t["warmup_steps"].get<int64_t>(), max_steps = t["max_steps"].get<int64_t>();
    if (warmup <= max_steps) return std::nullopt;
    t["warmup_steps"] = max_steps;
    return fmt::format("trainer.warmup_steps ({}, {}) is longer than the run (trainer.max_steps {}): shortened to {} "
                       "steps, so the learning rate reaches trainer.lr at the last step",
                       warmup, where, max_steps, max_steps);
}

}  // namespace llmt::config
