// Names the unknown subcommand or option on a command line, with the closest known name ("did you
// mean"), before CLI11 parses: CLI11 reports a missing required option first ("--config is required")
// and a mistyped subcommand as "A subcommand is required", hiding the word the user got wrong.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace llmt::cli {

// Edit distance: insert, delete, substitute or swap two adjacent characters, each costing 1 (optimal
// string alignment).
std::size_t edit_distance(const std::string& a, const std::string& b);

// The candidate nearest to `word` when it is close enough to be a likely typo (distance at most a third
// of the word's length, and at least 1 allowed; a candidate that starts with `word` also counts), else "".
std::string closest_name(const std::string& word, const std::vector<std::string>& candidates);

// Walks args (argv without the program name) through app's subcommand tree; throws UsageError naming the
// first unknown subcommand or --option, e.g. "unknown option '--confg' for 'train'; did you mean
// '--config'?". Stops at "--" (launch's worker command follows it). Leaves everything else to CLI11.
void check_command_names(const CLI::App& app, const std::vector<std::string>& args);

}  // namespace llmt::cli
