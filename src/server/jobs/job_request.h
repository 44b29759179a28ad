// POST /v1/jobs and POST /v1/estimate bodies: strict parsing (unknown fields are errors), DNS-label
// names, config from a preset name, a YAML string or a JSON object, overrides as --set would take
// them, and the same config validation as the CLI (ConfigValidationError with key paths).
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>

#include "config/config.h"
#include "server/jobs/job.h"

namespace llmt::server {

class PresetCache;

struct ParsedJob {
    JobSpec spec;
    std::shared_ptr<const config::Config> config;  // shared with the preset cache: never changed; null for a
                                                   // command job (spec.command)
    std::string config_yaml;  // the keys the request wrote (config::to_yaml_written): the job re-reads it, and
                              // a model directory (model.init_from) fills the unwritten model keys there
};

// Throws ApiError (400, naming the field) or config::ConfigValidationError. A preset name is loaded
// through `presets` (parsed once per file version and override list, preset_cache.h).
ParsedJob parse_job_request(const nlohmann::json& body, PresetCache& presets);

// RFC 1123 label: 1-63 of [a-z0-9-], starting and ending alphanumeric.
bool is_dns_label(const std::string& s);

}  // namespace llmt::server
