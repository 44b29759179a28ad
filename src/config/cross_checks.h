// The checks of a resolved config that read several keys (config/cross_checks.cpp): the loader runs them
// after every value was typed, and recheck_model_section runs the model section's part again after a
// Hugging Face config.json changed model keys.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <string>

#include "config/loader.h"
#include "config/validator.h"

namespace llmt::config {

// Where a key's value came from (file:line:col, --set, or the default), for messages: `loc` maps the
// written keys' paths to where they were written.
std::function<std::string(const std::string&)> locator(const std::map<std::string, std::string>& loc,
                                                       const Validator& v);

// The lora.* keys other than lora.r written without an adapter (lora.r 0): refused, naming the key.
void refuse_lora_keys_without_adapters(const nlohmann::ordered_json& r,
                                       const std::function<std::string(const std::string&)>& at, Validator& v);

// The model section: derived defaults (a null value), then the cross-field and per-architecture checks.
void model_checks(nlohmann::ordered_json& r, const std::function<std::string(const std::string&)>& at,
                  Validator& v);

// Every cross-field check of a resolved config (model_checks included); fills trainer.min_lr when unwritten.
void cross_checks(nlohmann::ordered_json& r, const std::map<std::string, std::string>& loc, Validator& v,
                  ConfigUse use);

}  // namespace llmt::config
