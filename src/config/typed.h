// Builds the typed Config from a resolved (validated, defaults materialized) JSON tree.
#pragma once

#include <nlohmann/json.hpp>

#include "config/config.h"

namespace llmt::config {

// Precondition: `resolved` passed validation (every key present with the schema's type).
Config from_resolved(const nlohmann::ordered_json& resolved);

}  // namespace llmt::config
