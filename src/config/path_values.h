// The file, directory and URI values of a resolved config, found through the schema's Access classes
// (config/schema.h): what the server's access policy checks (server/jobs/job_access.h) and what
// `llmtrain k8s` warns about. A key added to the schema with an Access class is covered here without
// a change.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "config/schema.h"

namespace llmt::config {

struct PathValue {
    std::string key;    // "data.tokenizer", "data.paths[1]"
    std::string field;  // the schema path: "data.paths"
    std::string value;
    Access access = Access::kNone;
    bool glob = false;
};

// Every value of a kRead / kWrite / kEndpoint key in `resolved` (a config with its defaults
// materialized), in schema order; values that name no file ("scratch", "gpt2", "") are left out.
std::vector<PathValue> path_values(const nlohmann::ordered_json& resolved);

}  // namespace llmt::config
