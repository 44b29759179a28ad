// YAML text for Kubernetes objects held as ordered JSON: keys in insertion order (so renders diff
// cleanly), strings that YAML 1.1 would read as another type (2, true, yes, null, 1e3) quoted, and
// multi-line strings as literal blocks. Emitted with yaml-cpp.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace llmt::k8s {

// One YAML document.
std::string to_yaml(const nlohmann::ordered_json& doc);

// Documents separated by `---` lines, as `kubectl apply -f -` reads them.
std::string to_yaml_stream(const std::vector<nlohmann::ordered_json>& docs);

// True when a plain (unquoted) scalar with this text would not read back as this string under
// YAML 1.1 or 1.2 (numbers, booleans incl. yes/no/on/off, null, ~, empty).
bool needs_quotes(const std::string& s);

}  // namespace llmt::k8s
