// The --config/--set options every config-taking subcommand shares, and loading through them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/config.h"

namespace CLI {
class App;
}

namespace llmt::cli {

struct ConfigOptions {
    std::string path;
    std::vector<std::string> sets;
};

// Adds `--config F` (required unless `config_required` is false: a command that reads a checkpoint finds
// the run's config there) and repeatable `--set key=value` to `cmd`.
std::shared_ptr<ConfigOptions> add_config_options(CLI::App* cmd, bool config_required = true);

// Loads and validates; throws config::ConfigValidationError with every problem.
config::Config load_config(const ConfigOptions& opts);

}  // namespace llmt::cli
