// `llmtrain version`: what this binary is (version, source revision, build type, backends).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/backends.h"
#include "core/cpu_features.h"
#include "core/knobs.h"
#include "core/version.h"

namespace llmt::cli {
namespace {

// Every knob of core/knobs.h with its value in effect, its default and whether the environment set it.
nlohmann::ordered_json knobs_json() {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const KnobInfo& k : knob_table())
        list.push_back({{"name", k.name},
                        {"value", knob_text(k.knob)},
                        {"default", k.dflt},
                        {"set", knob_is_set(k.knob)},
                        {"choices", k.choices},
                        {"changes", k.changes},
                        {"doc", k.doc}});
    return list;
}

// One line saying where the knobs are documented, then one per knob that differs from its default.
std::string knobs_text() {
    std::string s = fmt::format("{} LLMTRAIN_* variables, documented in {} (values: version --json)\n",
                                knob_table().size(), knob_table()[0].doc);
    for (const KnobInfo& k : knob_table())
        if (knob_text(k.knob) != k.dflt)
            s += fmt::format("            {}={} (default {})\n", k.name, knob_text(k.knob), k.dflt);
    return s;
}

}  // namespace

void register_version(CLI::App& app, Runtime& rt) {
    auto* cmd = app.add_subcommand("version", "Print version, git SHA, build type, CUDA on/off, BLAS in use");
    auto json = std::make_shared<bool>(false);
    cmd->add_flag("--json", *json, "print one JSON document");
    cmd->callback([json, &rt] {
        const auto& b = build_info();
        if (*json) {
            nlohmann::ordered_json j = {{"version", b.version},   {"git_sha", b.git_sha},
                                        {"build_type", b.build_type}, {"cuda", b.cuda},
                                        {"blas", blas_in_use()}, {"cpu", cpu_features().describe()},
                                        {"knobs", knobs_json()}};
            fmt::print("{}\n", j.dump());
        } else {
            fmt::print("llmtrain {}\ngit sha:    {}\nbuild type: {}\ncuda:       {}\nblas:       {}\ncpu:        {}\n"
                       "knobs:      {}",
                       b.version, b.git_sha, b.build_type, b.cuda ? "on" : "off", blas_in_use(),
                       cpu_features().describe(), knobs_text());
        }
        rt.exit_code = 0;
    });
}

}  // namespace llmt::cli
