// Estimates from measured throughput rows (estimate.h): tokens / (per-rank tokens/s x W x efficiency(W)),
// cost = device-hours x rate.
#include "server/estimate/estimate.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "core/error.h"
#include "core/fs.h"
#include "core/json_parse.h"
#include "models/registry.h"
#include "server/estimate/estimate_classifier.h"
#include "server/estimate/estimate_parts.h"

namespace llmt::server {

namespace {

struct JobShape {
    bool gpu = false;
    std::string precision;  // trainer.precision: fp32 | bf16 | auto
    int world = 1;
    int threads = 0;  // per rank: 1 on the CPU (what admission counts), 0 on a GPU
    double flops_per_token = 0;
    double tokens = 0;  // the whole run at the job's world size
};

JobShape shape_of(const JobSpec& spec, const config::Config& cfg) {
    JobShape s;
    s.gpu = spec.gpus_per_node > 0 || cfg.run.device == "cuda";
    s.precision = cfg.trainer.precision;
    s.world = spec.cpus();
    s.threads = s.gpu ? 0 : 1;  // a job's ranks run one thread each (server/jobs/job_request.h, local_executor.h)
    const int T = cfg.model.block_size;
    s.flops_per_token = models::model_flops_per_token(cfg.model, T);
    s.tokens = static_cast<double>(cfg.trainer.max_steps) * cfg.trainer.micro_batch_size *
               cfg.trainer.grad_accum_steps * T * s.world;
    return s;
}

// The token budget in words: what every world size's row trains.
std::string token_basis(const config::Config& cfg, const JobShape& s) {
    const auto& t = cfg.trainer;
    return fmt::format(
        "trainer.max_steps {} x global batch {} tokens (micro_batch_size {} x grad_accum_steps {} x "
        "block_size {} x {} rank{})",
        t.max_steps, s.tokens / static_cast<double>(t.max_steps), t.micro_batch_size, t.grad_accum_steps,
        cfg.model.block_size, s.world, s.world == 1 ? "" : "s");
}

// The rates of the job's trainer.precision, from the card's rows of that precision where it has any (else from
// all its rows). auto takes what the run would: bf16 on CUDA; on the CPU the precision whose rows measure faster
// on the card, as the probe of train/cpu_precision.h picks the faster there.
ThroughputEstimate estimate_for_precision(const JobShape& s, const ThroughputTable& table, int W) {
    const char* dev = s.gpu ? "cuda" : "cpu";
    const ThroughputEstimate any = estimate_throughput(table.rows, dev, table.card, s.flops_per_token, W, s.threads);
    if (!any.measured) return any;
    std::vector<std::string> precisions = {s.precision};
    if (s.precision == "auto")
        precisions = s.gpu ? std::vector<std::string>{"bf16"} : std::vector<std::string>{"fp32", "bf16"};
    std::optional<ThroughputEstimate> best;
    std::string taken;
    for (const std::string& p : precisions) {
        std::vector<ThroughputRow> rows;
        for (const ThroughputRow& r : table.rows)
            if (r.precision == p) rows.push_back(r);
        ThroughputEstimate e = estimate_throughput(rows, dev, any.card, s.flops_per_token, W, s.threads);
        if (e.measured && (!best || e.tokens_per_s_rank > best->tokens_per_s_rank)) best = e, taken = p;
    }
    if (!best) {
        ThroughputEstimate e = any;
        e.rate_basis += fmt::format("; the card has no trainer.precision {} rows, so all its rows", s.precision);
        return e;
    }
    best->rate_basis += s.precision == "auto"
                            ? fmt::format("; trainer.precision auto: the {} rows ({})", taken,
                                          s.gpu ? "auto means bf16 on CUDA" : "the faster measured on this card")
                            : fmt::format("; the trainer.precision {} rows", taken);
    return *best;
}

// Duration and cost of `tokens` at world size W from the table.
nlohmann::json at_world(const JobShape& s, const Rates& rates, const ThroughputTable& table, int W,
                        ThroughputEstimate* out = nullptr) {
    ThroughputEstimate t = estimate_for_precision(s, table, W);
    if (out) *out = t;
    if (!t.measured) return nullptr;
    const double tps = t.tokens_per_s_rank * W * t.efficiency;
    const double seconds = s.tokens / tps;
    const double device_hours = seconds / 3600 * W;
    return {{"world_size", W},
            {"tokens_per_s", tps},
            {"efficiency", t.efficiency},
            {"duration_s", seconds},
            {"device_hours", device_hours},
            {"cost_usd", cost_or_null(device_hours, s.gpu ? rates.gpu_hour_usd : rates.cpu_hour_usd)}};
}

std::string unmeasured_reason(const JobShape& s, const ThroughputTable& table) {
    const char* dev = s.gpu ? "cuda" : "cpu";
    if (table.path.empty()) return "no throughput table found (configs/throughput.jsonl; --throughput-file)";
    return fmt::format("{} has no world-size-1 language-model row for device {}{}", table.path, dev,
                       table.card.empty() ? "" : fmt::format(" on a card matching '{}'", table.card));
}

// The language-model rows only: a classifier's images/s rows are another unit (estimate_classifier.h).
ThroughputTable language_model_rows(const ThroughputTable& table) {
    return {rows_of_arch(table.rows, ""), table.path, table.card};
}

}  // namespace

nlohmann::json cost_or_null(double device_hours, double rate) {
    return rate > 0 ? nlohmann::json(device_hours * rate) : nlohmann::json(nullptr);
}

std::string cost_basis(bool gpu, const Rates& rates) {
    const double rate = gpu ? rates.gpu_hour_usd : rates.cpu_hour_usd;
    const char* key = gpu ? "gpu_hour_usd" : "cpu_hour_usd";
    if (rate > 0) return fmt::format("device-hours x {} {} (--rates-file)", key, rate);
    return fmt::format("no cost: no {} rate (--rates-file)", key);
}

nlohmann::json rows_json(const ThroughputTable& table, const std::vector<int>& lines) {
    nlohmann::json a = nlohmann::json::array();
    for (int l : lines)
        for (const ThroughputRow& r : table.rows)
            if (r.line == l) a.push_back(r.to_json());
    return a;
}

Rates load_rates(const std::filesystem::path& path) {
    const nlohmann::json j = parse_json(read_file(path, 1 << 20), path.string(), {1 << 20, 8, false});
    if (!j.is_object()) throw InputError(path.string() + ": expected a JSON object of rates");
    Rates r;
    for (auto& [k, v] : j.items()) {
        if (!v.is_number() || v.get<double>() < 0)
            throw InputError(fmt::format("{}: {} must be a number >= 0 (USD per device-hour)", path.string(), k));
        if (k == "cpu_hour_usd")
            r.cpu_hour_usd = v;
        else if (k == "gpu_hour_usd")
            r.gpu_hour_usd = v;
        else
            throw InputError(
                fmt::format("{}: unknown key '{}' (expected cpu_hour_usd, gpu_hour_usd)", path.string(), k));
    }
    return r;
}

nlohmann::json estimate_job(const JobSpec& spec, const config::Config& cfg, const Rates& rates,
                            const ThroughputTable& all) {
    if (cfg.model.is_classifier()) return estimate_classifier_job(spec, cfg, rates, all);
    const ThroughputTable table = language_model_rows(all);
    const JobShape s = shape_of(spec, cfg);
    ThroughputEstimate t;
    nlohmann::json w = at_world(s, rates, table, s.world, &t);
    nlohmann::json j = {{"source", t.measured ? "measured" : "unmeasured"},
                        {"device", s.gpu ? "cuda" : "cpu"},
                        {"flops_per_token", s.flops_per_token},
                        {"tokens", s.tokens},
                        {"max_steps", cfg.trainer.max_steps},
                        {"world_size", s.world},
                        {"tokens_basis", token_basis(cfg, s)},
                        {"cost_basis", cost_basis(s.gpu, rates)},
                        {"throughput_table", table.path}};
    if (!t.measured) {
        j["reason"] = unmeasured_reason(s, table);
        j["duration_s"] = j["device_hours"] = j["cost_usd"] = nullptr;
        return j;
    }
    for (auto& [k, v] : w.items()) j[k] = v;
    j["card"] = t.card;
    j["basis"] = {{"tokens_per_s_rank", t.tokens_per_s_rank},
                  {"threads_per_rank", t.threads_per_rank},
                  {"rate", t.rate_basis},
                  {"efficiency", t.efficiency_basis}};
    j["rows_used"] = rows_json(table, t.rows_used);
    return j;
}

nlohmann::json estimate_scaling(const JobSpec& spec, const config::Config& cfg, const Rates& rates,
                                const ThroughputTable& all, int max_world) {
    if (cfg.model.is_classifier()) return estimate_classifier_scaling(spec, cfg, rates, all, max_world);
    const ThroughputTable table = language_model_rows(all);
    const JobShape s = shape_of(spec, cfg);
    nlohmann::json j = {{"device", s.gpu ? "cuda" : "cpu"},
                        {"flops_per_token", s.flops_per_token},
                        {"tokens", s.tokens},
                        {"tokens_basis", token_basis(cfg, s)},
                        {"job_world_size", s.world},
                        {"cost_basis", cost_basis(s.gpu, rates)},
                        {"throughput_table", table.path}};
    nlohmann::json worlds = nlohmann::json::array(), basis = nlohmann::json::array();
    std::vector<int> lines;
    double base = 0;
    for (int W = 1; W <= max_world; ++W) {
        ThroughputEstimate t;
        nlohmann::json w = at_world(s, rates, table, W, &t);
        if (!t.measured) {
            j["source"] = "unmeasured";
            j["reason"] = unmeasured_reason(s, table);
            j["worlds"] = nlohmann::json::array();
            return j;
        }
        if (W == 1) {
            base = w["duration_s"];
            j["card"] = t.card;
            j["rate_basis"] = t.rate_basis;
            j["tokens_per_s_rank"] = t.tokens_per_s_rank;
            j["threads_per_rank"] = t.threads_per_rank;
        }
        w["speedup"] = base / w["duration_s"].get<double>();
        // The same tokens at every world size: a row of W ranks takes max_steps x job world / W steps of a
        // global batch W/job-world times the job's.
        const double step_tokens = s.tokens / static_cast<double>(cfg.trainer.max_steps) / s.world * W;
        w["global_batch_tokens"] = step_tokens;
        w["steps"] = s.tokens / step_tokens;
        w["efficiency_basis"] = t.efficiency_basis;
        worlds.push_back(w);
        lines.insert(lines.end(), t.rows_used.begin(), t.rows_used.end());
    }
    std::sort(lines.begin(), lines.end());
    lines.erase(std::unique(lines.begin(), lines.end()), lines.end());
    j["source"] = "measured";
    j["worlds"] = worlds;
    j["rows_used"] = rows_json(table, lines);
    return j;
}

}  // namespace llmt::server
