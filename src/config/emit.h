// Writes a resolved config back out: YAML (with each key's doc as a comment) or JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "config/config.h"

namespace llmt::config {

// YAML text that load_config_string() reads back to the same values.
std::string to_yaml(const nlohmann::ordered_json& resolved, bool with_comments = true);

// Only the keys the user wrote (cfg.written), with their values, in schema order: the config as the user
// meant it, for a process that loads it again and must tell written keys from defaults (a Hugging Face
// init_from takes the unwritten model keys from config.json, models/hf_config.h). to_yaml(cfg.resolved)
// writes every key, so everything in it reads back as written.
std::string to_yaml_written(const Config& cfg);

}  // namespace llmt::config
