#include "cli/config_options.h"

#include <CLI/CLI.hpp>

#include "config/loader.h"

namespace llmt::cli {

std::shared_ptr<ConfigOptions> add_config_options(CLI::App* cmd, bool config_required) {
    auto opts = std::make_shared<ConfigOptions>();
    cmd->add_option("--config,-c", opts->path,
                    config_required ? "YAML config file (see configs/presets/)"
                                    : "YAML config file (default: the config stored with --checkpoint)")
        ->required(config_required);
    cmd->add_option("--set", opts->sets,
                    "override a key, e.g. --set trainer.lr=3e-4 (repeatable; YAML scalars, lists as [a, b])")
        ->allow_extra_args(false);
    return opts;
}

config::Config load_config(const ConfigOptions& opts) { return config::load_config_file(opts.path, opts.sets); }

}  // namespace llmt::cli
