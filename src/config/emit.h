// Writes a resolved config back out: YAML (with each key's doc as a comment) or JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace llmt::config {

// YAML text that load_config_string() reads back to the same values.
std::string to_yaml(const nlohmann::ordered_json& resolved, bool with_comments = true);

}  // namespace llmt::config
