// `llmtrain version`: what this binary is (version, source revision, build type, backends).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/backends.h"
#include "core/cpu_features.h"
#include "core/knobs.h"
#include "config/loader.h"
#include "core/version.h"
#include "kernels/gemm_probe.h"
#include "train/cpu_precision.h"

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

// Every location of core/knobs.h: what it names and its value now ("" when unset).
nlohmann::ordered_json locations_json() {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const LocationInfo& l : location_table())
        list.push_back({{"name", l.name}, {"value", location_value(l.location)}, {"what", l.what}, {"doc", l.doc}});
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

// The probe trainer.precision: auto decides from (train/cpu_precision.h), on the GEMM shapes of the
// gpt2_tiny_cpu preset's model; measured now (about a second on 2 cores), not cached.
nlohmann::ordered_json gemm_probe_json() {
    const config::Config cfg = config::load_config_string(
        "schema_version: 1\nmodel: {arch: gpt2, n_layer: 4, n_head: 4, d_model: 256, block_size: 256}\n"
        "trainer: {micro_batch_size: 8, eval_every_steps: 0}\ndata: {train_shards: unread_*.bin}\n",
        "<version --gemm-probe>", {});
    const kernels::GemmProbe p = kernels::probe_gemm_rates(train::probe_shapes(cfg));
    return {{"shapes", "gpt2 4 layers, d_model 256, T 256, micro_batch_size 8 (the gpt2_tiny_cpu preset)"},
            {"threads", p.threads},
            {"fp32_gflops", p.fp32_gflops},
            {"bf16_gflops", p.bf16_gflops},
            {"bf16_path", p.bf16_path},
            {"bf16_how", p.bf16_how},
            {"libraries", kernels::cpu_gemm_libraries()},
            {"auto_takes", train::faster_precision(p.fp32_gflops, p.bf16_gflops)},
            {"probe_s", p.seconds}};
}

}  // namespace

void register_version(CLI::App& app, Runtime& rt) {
    auto* cmd = app.add_subcommand("version", "Print version, git SHA, build type, CUDA on/off, BLAS in use");
    auto json = std::make_shared<bool>(false);
    cmd->add_flag("--json", *json, "print one JSON document");
    auto probe = std::make_shared<bool>(false);
    cmd->add_flag("--gemm-probe", *probe,
                  "also measure the CPU's fp32 and bf16 GEMM rates and say which trainer.precision: auto takes "
                  "(loads the GEMM libraries; about a second on 2 cores)");
    cmd->callback([json, probe, &rt] {
        const auto& b = build_info();
        const nlohmann::ordered_json gemm = *probe ? gemm_probe_json() : nlohmann::ordered_json();
        if (*json) {
            nlohmann::ordered_json j = {{"version", b.version},   {"git_sha", b.git_sha},
                                        {"build_type", b.build_type}, {"cuda", b.cuda},
                                        {"blas", blas_in_use()}, {"cpu", cpu_features().describe()},
                                        {"knobs", knobs_json()},
                                        {"locations", locations_json()}};
            if (*probe) j["cpu_gemm_probe"] = gemm;
            fmt::print("{}\n", j.dump());
        } else {
            fmt::print("llmtrain {}\ngit sha:    {}\nbuild type: {}\ncuda:       {}\nblas:       {}\ncpu:        {}\n"
                       "knobs:      {}",
                       b.version, b.git_sha, b.build_type, b.cuda ? "on" : "off", blas_in_use(),
                       cpu_features().describe(), knobs_text());
            if (*probe)
                fmt::print("gemm probe: fp32 {:.1f} GFLOP/s, bf16 {:.1f} GFLOP/s ({}), {} threads: "
                           "trainer.precision auto takes {}\n",
                           gemm["fp32_gflops"].get<double>(), gemm["bf16_gflops"].get<double>(),
                           gemm["bf16_how"].get<std::string>(), gemm["threads"].get<int>(),
                           gemm["auto_takes"].get<std::string>());
        }
        rt.exit_code = 0;
    });
}

}  // namespace llmt::cli
