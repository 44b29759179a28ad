// `llmtrain estimate`: duration, cost, speedup and scaling efficiency of a config at world sizes 1..N,
// from the measured throughput rows (server/estimate/throughput.h) — the same code as the server's estimates.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/config_options.h"
#include "core/error.h"
#include "models/hf_resolve.h"
#include "server/estimate/estimate.h"
#include "train/run_plan.h"
#include "train/zero_scale.h"

namespace llmt::cli {

namespace {

std::string duration_text(double s) {
    if (s < 120) return fmt::format("{:.1f} s", s);
    if (s < 7200) return fmt::format("{:.1f} min", s / 60);
    return fmt::format("{:.2f} h", s / 3600);
}

// What every row trains, and where the rate comes from.
void print_basis(const std::string& path, const nlohmann::json& est, const config::Config& cfg) {
    fmt::print("{}: {:.4g} tokens = {}\n", path, est["tokens"].get<double>(), est["tokens_basis"].get<std::string>());
    fmt::print("every row trains these {:.4g} tokens: a row of W ranks takes {} x {} / W steps of a global batch W/{} "
               "times this one's (the 1-rank row is this run's tokens on one rank, not this config trained alone)\n",
               est["tokens"].get<double>(), cfg.trainer.max_steps, est["job_world_size"].get<int>(),
               est["job_world_size"].get<int>());
    fmt::print("device {} ({}); one rank: {:.0f} tokens/s: {}\n", est["device"].get<std::string>(),
               est["card"].get<std::string>(), est["tokens_per_s_rank"].get<double>(),
               est["rate_basis"].get<std::string>());
    fmt::print("cost: {}\n\n", est["cost_basis"].get<std::string>());
}

// One row per world size; no cost column without a rate (an unknown cost is not $0).
void print_worlds(const nlohmann::json& est) {
    const bool costs = !est["worlds"].empty() && est["worlds"][0]["cost_usd"].is_number();
    fmt::print("{:>6} {:>10} {:>13} {:>12} {:>10} {:>8} {:>11}{}  {}\n", "ranks", "steps", "batch tokens", "tokens/s",
               "duration", "speedup", "efficiency", costs ? fmt::format(" {:>10}", "cost USD") : "",
               "efficiency from");
    for (const auto& w : est["worlds"])
        fmt::print("{:>6} {:>10.0f} {:>13.0f} {:>12.0f} {:>10} {:>7.2f}x {:>10.1f}%{}  {}\n",
                   w["world_size"].get<int>(), w["steps"].get<double>(), w["global_batch_tokens"].get<double>(),
                   w["tokens_per_s"].get<double>(), duration_text(w["duration_s"].get<double>()),
                   w["speedup"].get<double>(), 100 * w["efficiency"].get<double>(),
                   costs ? fmt::format(" {:>10.4f}", w["cost_usd"].get<double>()) : "",
                   w["efficiency_basis"].get<std::string>());
}

// An image classifier's estimate speaks in images and epochs (server/estimate/estimate_classifier.h).
void print_classifier(const std::string& path, const nlohmann::json& est) {
    fmt::print("{}: {} ({:.4g} training FLOPs/image); {}\n", path, est["model"].get<std::string>(),
               est["flops_per_image"].get<double>(), est["images_basis"].get<std::string>());
    fmt::print("device {} ({}); one rank: {:.0f} images/s: {}\n", est["device"].get<std::string>(),
               est["card"].get<std::string>(), est["images_per_s_rank"].get<double>(),
               est["rate_basis"].get<std::string>());
    fmt::print("cost: {}\n\n", est["cost_basis"].get<std::string>());
    const bool costs = !est["worlds"].empty() && est["worlds"][0]["cost_usd"].is_number();
    fmt::print("{:>6} {:>9} {:>12} {:>12} {:>10} {:>10} {:>8} {:>11}{}  {}\n", "ranks", "steps", "batch images",
               "images/s", "s/epoch", "duration", "speedup", "efficiency",
               costs ? fmt::format(" {:>10}", "cost USD") : "", "efficiency from");
    for (const auto& w : est["worlds"])
        fmt::print(
            "{:>6} {:>9.0f} {:>12} {:>12.0f} {:>10} {:>10} {:>7.2f}x {:>10.1f}%{}  {}\n", w["world_size"].get<int>(),
            w["steps"].get<double>(), w["global_batch_images"].get<int>(), w["images_per_s"].get<double>(),
            w["seconds_per_epoch"].is_number() ? fmt::format("{:.1f}", w["seconds_per_epoch"].get<double>()) : "-",
            duration_text(w["duration_s"].get<double>()), w["speedup"].get<double>(),
            100 * w["efficiency"].get<double>(), costs ? fmt::format(" {:>10.4f}", w["cost_usd"].get<double>()) : "",
            w["efficiency_basis"].get<std::string>());
}

// One measured row: its rate in the unit it counts.
std::string row_text(const nlohmann::json& r) {
    const bool images = r.contains("images_per_s");
    return fmt::format("{} x{} {} {:.0f} {} on {} ({}, {})", r["model"].get<std::string>(), r["world_size"].get<int>(),
                       r["precision"].get<std::string>(), r[images ? "images_per_s" : "tokens_per_s"].get<double>(),
                       images ? "images/s" : "tok/s", r["card"].get<std::string>(), r["date"].get<std::string>(),
                       r["command"].get<std::string>());
}

// Model state per GPU at each ZeRO stage for 1..64 GPUs (train/zero_scale.h), and the stage and GPU count
// the model needs on GPUs of `gpu_bytes` with the memory plan's activations (this config's micro-batch,
// context and recompute) kept free.
nlohmann::json zero_stages(const config::Config& cfg, double gpu_bytes) {
    const train::ScaleModel m = train::scale_model(cfg);
    const DType dtype = cfg.trainer.precision == "bf16" ? DType::kBF16 : DType::kF32;
    const double act = static_cast<double>(train::estimate_training_memory(cfg, Device::kCuda, dtype).activations);
    nlohmann::json rows = nlohmann::json::array();
    std::vector<int> worlds;
    for (int n = 1; n <= 64; n *= 2) {
        worlds.push_back(n);
        nlohmann::json r = {{"world_size", n}};
        using train::ZeroStage;
        for (auto s : {ZeroStage::k0, ZeroStage::k1, ZeroStage::k3}) {
            const train::StageCost c = train::stage_cost(m, s, n);
            r[std::string("stage ") + train::zero_stage_name(s)] = {{"bytes_per_gpu", c.bytes_per_gpu},
                                                                    {"comm_bytes_per_step", c.comm_bytes}};
        }
        rows.push_back(r);
    }
    const train::StageChoice need = train::choose_stage(m, gpu_bytes, act, worlds);
    return {{"parameters", m.parameters},      {"gpu_bytes", gpu_bytes}, {"activations_bytes", act},
            {"rows", rows},
            {"needs", need.stage.empty() ? nlohmann::json() : nlohmann::json({{"world_size", need.world},
                                                                               {"zero_stage", need.stage}})}};
}

void print_zero_stages(const nlohmann::json& z) {
    constexpr double kGB = 1e9;
    fmt::print("\nmodel state per GPU by dist.zero_stage ({:.3g} parameters: weights, gradients and optimizer "
               "state; activations {:.1f} GB more) and GB each GPU sends per step; docs/distributed.md \"Scale on "
               "paper\":\n",
               z["parameters"].get<double>(), z["activations_bytes"].get<double>() / kGB);
    fmt::print("{:>6} {:>10} {:>10} {:>10} {:>11} {:>8}\n", "GPUs", "stage 0", "stage 1", "stage 3", "sent 0, 3",
               "sent 1");
    auto gb = [&](const nlohmann::json& r, const char* stage, const char* what) {
        return r[stage][what].get<double>() / kGB;
    };
    for (const auto& r : z["rows"])
        fmt::print("{:>6} {:>8.1f}GB {:>8.1f}GB {:>8.1f}GB {:>9.1f}GB {:>6.1f}GB\n", r["world_size"].get<int>(),
                   gb(r, "stage 0", "bytes_per_gpu"), gb(r, "stage 1", "bytes_per_gpu"),
                   gb(r, "stage 3", "bytes_per_gpu"), gb(r, "stage 0", "comm_bytes_per_step"),
                   gb(r, "stage 1", "comm_bytes_per_step"));
    const double gpu = z["gpu_bytes"].get<double>() / kGB;
    if (z["needs"].is_null())
        fmt::print("needs: more than 64 GPUs of {:.0f} GB at stage 3, or tensor/pipeline parallelism (not in this "
                   "build)\n", gpu);
    else
        fmt::print("needs: dist.zero_stage {} on {} GPU(s) of {:.0f} GB\n",
                   z["needs"]["zero_stage"].get<std::string>(), z["needs"]["world_size"].get<int>(), gpu);
}

}  // namespace

void register_estimate(CLI::App& app, Runtime& rt) {
    auto* cmd = app.add_subcommand("estimate",
                                   "Duration, cost, speedup and efficiency of a config at world sizes 1..N, from "
                                   "measured throughput rows");
    auto opts = add_config_options(cmd);
    struct Args {
        int nodes = 1, nproc_per_node = 1, gpus_per_node = 0;
        std::string rates, throughput, card, gpu_memory = "141GB";
        bool json = false;
    };
    auto a = std::make_shared<Args>();
    cmd->add_option("--nodes", a->nodes, "nodes (N = nodes x nproc-per-node ranks)")->check(CLI::Range(1, 4096));
    cmd->add_option("--nproc-per-node", a->nproc_per_node, "ranks per node")->check(CLI::Range(1, 1024));
    cmd->add_option("--gpus-per-node", a->gpus_per_node, "GPUs per node (> 0: a GPU job, one GPU per rank)")
        ->check(CLI::Range(0, 64));
    cmd->add_option("--rates-file", a->rates,
                    "JSON {\"cpu_hour_usd\": x, \"gpu_hour_usd\": y} (without: no cost is shown)");
    cmd->add_option("--throughput-file", a->throughput,
                    "measured rows (default: configs/throughput.jsonl beside the binary)");
    cmd->add_option("--card", a->card, "use the rows of this card (substring; default: the latest measured)");
    cmd->add_option("--gpu-memory", a->gpu_memory,
                    "memory of one GPU for the ZeRO stage table (default 141GB, an H200)");
    cmd->add_flag("--json", a->json, "print one JSON document");
    cmd->callback([opts, a, &rt] {
        config::Config cfg = load_config(*opts);
        models::prepare_init_from(cfg);  // a model directory's config.json gives the shape
        if (a->gpus_per_node > 0 && a->gpus_per_node != a->nproc_per_node)
            throw UsageError(fmt::format("--gpus-per-node {} must equal --nproc-per-node {} (one GPU per rank)",
                                         a->gpus_per_node, a->nproc_per_node));
        server::JobSpec spec;
        spec.nodes = a->nodes;
        spec.nproc_per_node = a->nproc_per_node;
        spec.gpus_per_node = a->gpus_per_node;
        server::Rates rates;
        if (!a->rates.empty()) rates = server::load_rates(a->rates);
        server::ThroughputTable table;
        table.card = a->card;
        auto file = a->throughput.empty() ? server::default_throughput_file()
                                          : std::optional<std::filesystem::path>(a->throughput);
        if (file) {
            table.rows = server::load_throughput(*file);
            table.path = file->string();
        }
        const int N = spec.cpus();
        nlohmann::json est = server::estimate_scaling(spec, cfg, rates, table, N);
        const double gpu_bytes = static_cast<double>(train::parse_memory_size(a->gpu_memory));
        if (!cfg.model.is_classifier()) est["zero_stages"] = zero_stages(cfg, gpu_bytes);
        if (a->json) {
            est["config"] = opts->path;
            fmt::print("{}\n", est.dump(2));
            rt.exit_code = 0;  // "source" says whether it is measured
            return;
        }
        if (est["source"] != "measured") {
            fmt::print(stderr, "llmtrain estimate: no estimate: {}\n", est["reason"].get<std::string>());
            rt.exit_code = 1;
            return;
        }
        if (cfg.model.is_classifier()) {
            print_classifier(opts->path, est);
        } else {
            print_basis(opts->path, est, cfg);
            print_worlds(est);
            print_zero_stages(est["zero_stages"]);
        }
        fmt::print("\nmeasured rows used ({}):\n", est["throughput_table"].get<std::string>());
        for (const auto& r : est["rows_used"]) fmt::print("  line {}: {}\n", r["line"].get<int>(), row_text(r));
        rt.exit_code = 0;
    });
}

}  // namespace llmt::cli
