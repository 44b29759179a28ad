// Limits on a YAML text checked from its parse events, before a node tree is walked: one document
// only, at most max_aliases aliases, and at most max_nodes nodes counting each alias as a full copy of
// what it names (so ten levels of nine aliases, a few hundred bytes, is refused in microseconds
// instead of being walked 9^10 times). The scan keeps one counter per anchor, never the tree.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace llmt::config {

struct YamlLimits {
    std::size_t max_nodes = 100'000;  // expanded; the largest preset has a few hundred
    std::size_t max_aliases = 1'000;
};
inline constexpr YamlLimits kDefaultYamlLimits{};

// A limit the text breaks: 1-based line and column of the event that broke it, and the message.
struct YamlBoundsIssue {
    int line = 0;
    int column = 0;
    std::string message;
};

// Scans `text`'s events. Returns the first limit broken, or nullopt. Throws YAML::Exception
// (YAML::ParserException, YAML::DeepRecursion) when the text is not YAML, as YAML::Load would.
// Thread-safe.
std::optional<YamlBoundsIssue> find_yaml_bounds_issue(std::string_view text, const YamlLimits& limits = {});

}  // namespace llmt::config
