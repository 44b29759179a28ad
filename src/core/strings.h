// Small string utilities shared by layers: nearest-match suggestions, UTF-8 checks, trimming.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace llmt {

// Levenshtein edit distance (insert, delete, substitute each cost 1).
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word` by edit distance, if it is close enough to be a plausible typo
// (distance <= max(2, len/3)) or shares the word as a prefix/suffix.
std::optional<std::string> nearest_match(std::string_view word, const std::vector<std::string>& candidates);

// True when `s` is valid UTF-8 (no overlongs, no surrogates, code points <= U+10FFFF).
bool is_valid_utf8(std::string_view s);

// Offset of the first invalid UTF-8 byte, or npos when valid.
std::size_t first_invalid_utf8(std::string_view s);

std::string_view trim(std::string_view s);
std::vector<std::string> split(std::string_view s, char sep);

}  // namespace llmt
