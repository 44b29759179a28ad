// A short description of a JSON value for error messages: arrays and objects by kind and size,
// scalars quoted up to 64 bytes. Never serialises a whole caller's value (a deep one would recurse
// and a large one would flood the message).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace llmt {

// "an array of 3 elements", "an object of 2 keys", "null", "true", "12", "\"abc\"",
// "\"abcd...\" (a string of 1000 bytes)". Invalid UTF-8 is kept as bytes: dump the message with
// error_handler_t::replace. Thread-safe.
std::string describe_json(const nlohmann::json& v);

}  // namespace llmt
