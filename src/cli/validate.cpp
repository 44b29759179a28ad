// `llmtrain validate` and `llmtrain print-config`: strict config checking and the resolved config.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "cli/command.h"
#include "cli/config_options.h"
#include "config/emit.h"
#include "config/loader.h"
#include "models/hf_resolve.h"
#include "kernels/ops.h"
#include "train/cpu_precision.h"
#include "train/run_plan.h"

namespace llmt::cli {
namespace {

nlohmann::ordered_json issues_json(const config::ConfigValidationError& e) {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const auto& i : e.issues()) arr.push_back({{"key", i.key}, {"where", i.where}, {"message", i.message}});
    return arr;
}

// trainer.precision: auto as this machine would run it (train/cpu_precision.h: on the CPU the probe's choice,
// cached), written into the resolved config; what was measured goes to stderr.
void resolve_auto_precision(config::Config& cfg) {
    if (cfg.trainer.precision != "auto") return;
    kernels::set_cpu_threads(cfg.run.threads);  // the probe runs on the threads training would use
    // run.device cuda: bf16 whether or not this machine has the GPU (the config may be for another host).
    const Device device = cfg.run.device == "cuda" ? Device::kCuda : train::resolve_device(cfg, 1);
    const train::PrecisionChoice c = train::resolve_precision(cfg, device);
    for (const auto& line : c.log_lines()) fmt::print(stderr, "{}\n", line);
    cfg.resolved["trainer"]["precision"] = c.precision;
}

}  // namespace

void register_validate(CLI::App& app, Runtime& rt) {
    auto* cmd = app.add_subcommand("validate", "Check a config strictly; report every problem with its key path");
    auto opts = add_config_options(cmd);
    auto json = std::make_shared<bool>(false);
    cmd->add_flag("--json", *json, "print one JSON document {ok, config, errors, memory_bytes}");
    auto max_memory = std::make_shared<std::string>();
    cmd->add_option("--max-memory", *max_memory,
                    "refuse the config when training it needs more than SIZE per process (e.g. 64GiB); default: "
                    "the GPU's memory or the host's MemAvailable");
    auto world = std::make_shared<int>(1);
    cmd->add_option("--world-size", *world,
                    "size the memory for one rank of a job of N processes (dist.zero_stage: 1 shards the optimizer "
                    "state and, under bf16, the fp32 master weights over them; 3 also the weights and gradients); "
                    "default 1")
        ->check(CLI::Range(1, 1 << 20));
    cmd->callback([opts, json, max_memory, world, &rt] {
        try {
            auto cfg = load_config(*opts);
            if (!*json)
                for (const auto& w : cfg.warnings) fmt::print(stderr, "{}: warning: {}\n", opts->path, w);
            // A model directory that is here (not only inside a pod) gives the shape the memory is sized from,
            // and its config.json must agree with the keys written.
            std::error_code ec;
            const bool absent_base = cfg.model.init_from != "scratch" && !cfg.model.init_from.empty() &&
                                     !std::filesystem::exists(cfg.model.init_from, ec);
            if (cfg.model.init_from != "scratch" && !absent_base) models::prepare_init_from(cfg);
            if (absent_base && !*json)
                fmt::print(stderr, "{}: note: model.init_from '{}' is not here (yet); the memory below is sized from "
                           "the config's model keys, not from its config.json\n",
                           opts->path, cfg.model.init_from);
            std::optional<std::uint64_t> limit;
            if (!max_memory->empty()) limit = train::parse_memory_size(*max_memory);
            // Memory of a training process, estimated without allocating: a model that cannot fit is refused.
            const train::MemoryCheck mem = train::check_config_memory(cfg, limit, *world);
            const auto& e = mem.estimate;
            if (*json) {
                nlohmann::ordered_json j = {{"ok", true},
                                            {"config", opts->path},
                                            {"errors", nlohmann::json::array()},
                                            {"warnings", cfg.warnings},
                                            {"memory_bytes",
                                             {{"parameters", e.parameters},
                                              {"gradients", e.gradients},
                                              {"optimizer", e.optimizer},
                                              {"activations", e.activations},
                                              {"total", e.total()},
                                              {"limit", mem.limit.bytes}}}};
                fmt::print("{}\n", j.dump());
            } else {
                fmt::print(stderr, "{}: ok (training needs {:.2f} GiB per process{})\n", opts->path,
                           e.total() / 1073741824.0,
                           mem.limit.bytes ? fmt::format(" of {:.2f} GiB, {}", mem.limit.bytes / 1073741824.0,
                                                         mem.limit.source)
                                           : std::string());
            }
            rt.exit_code = 0;
        } catch (const config::ConfigValidationError& e) {
            if (!*json) throw;
            nlohmann::ordered_json j = {{"ok", false}, {"config", opts->path}, {"errors", issues_json(e)}};
            fmt::print("{}\n", j.dump());
            fmt::print(stderr, "llmtrain: error: {}\n", e.what());
            rt.exit_code = 2;
        }
    });
}

void register_print_config(CLI::App& app, Runtime& rt) {
    auto* cmd =
        app.add_subcommand("print-config",
                           "Print the resolved config with every default materialized (trainer.precision: auto "
                           "as this machine resolves it)");
    auto opts = add_config_options(cmd);
    auto json = std::make_shared<bool>(false);
    auto bare = std::make_shared<bool>(false);
    cmd->add_flag("--json", *json, "print JSON instead of YAML");
    cmd->add_flag("--no-comments", *bare, "YAML without the one-line doc comment per key");
    cmd->callback([opts, json, bare, &rt] {
        auto cfg = load_config(*opts);
        resolve_auto_precision(cfg);
        if (*json) {
            fmt::print("{}\n", cfg.resolved.dump(2));
        } else {
            fmt::print("# resolved from {}\n{}", opts->path, config::to_yaml(cfg.resolved, !*bare));
        }
        rt.exit_code = 0;
    });
}

}  // namespace llmt::cli
