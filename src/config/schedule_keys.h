// Schedule keys adjusted the way Hugging Face and PyTorch users expect instead of refused: a warmup
// longer than the run is shortened to the run, with a warning that says so (a quick `--set
// trainer.max_steps=12` on a preset with warmup_steps: 20 trains; it is not a config error).
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace llmt::config {

// When trainer.warmup_steps > trainer.max_steps in `resolved`: sets it to max_steps and returns the
// warning (naming both keys, the values and `where` the warmup came from); else nullopt.
std::optional<std::string> clamp_warmup_to_run(nlohmann::ordered_json& resolved, const std::string& where);

}  // namespace llmt::config
