#include "config/schedule_keys.h"

#include <fmt/format.h>

#include "config/arch_table.h"
#include "config/schema.h"

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

std::optional<std::string> max_steps_over_epochs(nlohmann::ordered_json& resolved, const std::string& max_steps_where,
                                                 const std::string& epochs_where) {
    auto& t = resolved["trainer"];
    const auto& arch = resolved["model"]["arch"];
    if (!arch.is_string() || !is_classifier_arch(arch.get<std::string>())) return std::nullopt;
    if (max_steps_where.empty() || epochs_where.empty() || t["epochs"].get<int64_t>() == 0 ||
        t["max_steps"] == find_field("trainer.max_steps")->default_value)
        return std::nullopt;
    const std::string msg = fmt::format("trainer.max_steps ({}, {}) and trainer.epochs ({}, {}) are both written: "
                                        "trainer.max_steps wins, the run is {} steps",
                                        t["max_steps"].get<int64_t>(), max_steps_where, t["epochs"].get<int64_t>(),
                                        epochs_where, t["max_steps"].get<int64_t>());
    t["epochs"] = 0;
    return msg;
}

}  // namespace llmt::config
