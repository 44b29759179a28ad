// Bounded JSON parsing for input that is not ours (request bodies, files a user names, JSONL lines):
// a size and a nesting-depth limit, duplicate object keys and numbers that do not fit refused, and
// errors that name the byte offset, line/column and key path but never quote the input's bytes.
// Built on nlohmann::json's SAX parser, which is iterative, so hostile nesting cannot exhaust the stack.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"

namespace llmt {

// Defaults fit every JSON llmtrain reads; a caller with larger legitimate input (a tokenizer.json)
// raises max_bytes. max_depth counts open arrays and objects: {"a": [1]} has depth 2.
// name_keys: errors name the key path ("config.trainer.lr"); false for files whose key names may be
// secret (a credentials file named where a tokenizer was expected): errors then give only the offset.
struct JsonLimits {
    std::size_t max_bytes = std::size_t{16} << 20;
    int max_depth = 64;
    bool name_keys = true;
};
inline constexpr JsonLimits kDefaultJsonLimits{};

// Why parse_json refused its input. what() is "<source>: <reason> at byte B (line L, column C)[, at
// key K]"; the parts are kept for callers that report them in their own shape (the HTTP API's field).
class JsonParseError : public FormatError {
public:
    JsonParseError(std::string source, std::string reason, std::size_t byte, std::size_t line, std::size_t column,
                   std::string key_path);
    const std::string& reason() const { return reason_; }
    std::size_t byte() const { return byte_; }
    // The key path of the value being read, e.g. "config.trainer.lr" or "tokens[3]"; "" at the top level.
    const std::string& key_path() const { return key_path_; }

private:
    std::string reason_;
    std::size_t byte_;
    std::string key_path_;
};

// Parses one JSON value (surrounding whitespace allowed). `source` names the input in messages
// ("request body", a file path, "file.jsonl:12"). Throws JsonParseError when the text is over
// limits.max_bytes, nests deeper than limits.max_depth, is not JSON, repeats a key within one object,
// or holds a number that does not fit a double (1e400) or an integer literal beyond 64 bits.
// Thread-safe; the result owns no reference to `text`.
nlohmann::json parse_json(std::string_view text, const std::string& source, const JsonLimits& limits = {});

// The same, keeping object keys in input order (nlohmann::ordered_json).
nlohmann::ordered_json parse_ordered_json(std::string_view text, const std::string& source,
                                          const JsonLimits& limits = {});

// parse_json that returns nullopt instead of throwing, for inputs where a bad line is skipped.
std::optional<nlohmann::json> try_parse_json(std::string_view text, const JsonLimits& limits = {});

}  // namespace llmt
