// Schedule keys adjusted the way Hugging Face and PyTorch users expect instead of refused: a warmup
// longer than the run is shortened to the run, with a warning that says so (a quick `--set
// trainer.max_steps=12` on a preset with warmup_steps: 20 trains; it is not a config error), and one
// length when both trainer.max_steps and trainer.epochs are written.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace llmt::config {

// When trainer.warmup_steps > trainer.max_steps in `resolved`: sets it to max_steps and returns the
// warning (naming both keys, the values and `where` the warmup came from); else nullopt.
std::optional<std::string> clamp_warmup_to_run(nlohmann::ordered_json& resolved, const std::string& where);

// An image classifier's trainer.max_steps written together with trainer.epochs (`*_where`: where each was
// written, "" when it was not): max_steps wins (transformers' TrainingArguments rule) and epochs is set to
// 0 in `resolved`, so every reader (trainer, estimates, the stored config) sees one length; returns the
// warning naming both. max_steps at its default counts as not written: a resolved config (a checkpoint's,
// one printed whole) holds it beside the epochs that decided, and must load as it was. A language model's
// trainer.epochs is left to be refused by name.
std::optional<std::string> max_steps_over_epochs(nlohmann::ordered_json& resolved, const std::string& max_steps_where,
                                                 const std::string& epochs_where);

}  // namespace llmt::config
