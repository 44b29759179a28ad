// `llmtrain version`: what this binary is (version, source revision, build type, backends).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/backends.h"
#include "core/cpu_features.h"
#include "core/version.h"

namespace llmt::cli {

void register_version(CLI::App& app, Runtime& rt) {
    auto* cmd = app.add_subcommand("version", "Print version, git SHA, build type, CUDA on/off, BLAS in use");
    auto json = std::make_shared<bool>(false);
    cmd->add_flag("--json", *json, "print one JSON document");
    cmd->callback([json, &rt] {
        const auto& b = build_info();
        if (*json) {
            nlohmann::ordered_json j = {{"version", b.version},   {"git_sha", b.git_sha},
                                        {"build_type", b.build_type}, {"cuda", b.cuda},
                                        {"blas", blas_in_use()}, {"cpu", cpu_features().describe()}};
            fmt::print("{}\n", j.dump());
        } else {
            fmt::print("llmtrain {}\ngit sha:    {}\nbuild type: {}\ncuda:       {}\nblas:       {}\ncpu:        {}\n",
                       b.version, b.git_sha, b.build_type, b.cuda ? "on" : "off", blas_in_use(),
                       cpu_features().describe());
        }
        rt.exit_code = 0;
    });
}

}  // namespace llmt::cli
