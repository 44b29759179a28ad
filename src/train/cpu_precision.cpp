// trainer.precision resolved (cpu_precision.h): the probe's shapes from the model config, its cache, the choice.
#include "train/cpu_precision.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "config/arch_table.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/sha256.h"
#include "core/time.h"
#include "core/version.h"

namespace llmt::train {
namespace {

constexpr int64_t kMaxRows = 2048;     // stand-in rows (micro_batch_size x block_size above this)
constexpr int64_t kMinRows = 256;
constexpr int64_t kMaxFeatures = 4096;  // stand-in input and output features (the LM head's vocabulary)
constexpr int64_t kMinFeatures = 1024;
constexpr double kMaxPassFlops = 24e9; // one pass over the shapes, one precision

// vendor, family, model, stepping and name of the first processor in /proc/cpuinfo.
std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    std::string line, out;
    int fields = 0;
    while (std::getline(in, line) && fields < 5) {
        const size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string key = line.substr(0, colon);
        key.erase(key.find_last_not_of(" \t") + 1);
        if (key == "vendor_id" || key == "cpu family" || key == "model" || key == "stepping" || key == "model name") {
            out += (out.empty() ? "" : ", ") + key + " " + line.substr(std::min(line.size(), colon + 2));
            ++fields;
        }
    }
    return out.empty() ? "unknown" : out;
}

nlohmann::ordered_json shapes_json(const std::vector<kernels::GemmShape>& shapes) {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (const auto& s : shapes)
        a.push_back({s.trans_a, s.trans_b, s.M, s.N, s.K, s.accumulate, std::round(s.weight * 1e6) / 1e6});
    return a;
}

// What the cached figures belong to; its hash names the file.
nlohmann::ordered_json cache_identity(const std::vector<kernels::GemmShape>& shapes) {
    return {{"cpu", cpu_model()},
            {"cpu_features", cpu_features().describe()},
            {"libraries", kernels::cpu_gemm_libraries()},
            {"llmtrain_version", build_info().version},
            {"threads", omp_get_max_threads()},
            {"shapes", shapes_json(shapes)}};
}

// The cached probe when `file` holds one for `identity`.
std::optional<kernels::GemmProbe> read_cache(const std::filesystem::path& file, const nlohmann::ordered_json& identity,
                                             std::string& note) {
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) return std::nullopt;
    try {
        const auto j = nlohmann::ordered_json::parse(read_file(file, 1 << 20));
        for (const auto& [k, v] : identity.items())
            if (j.at(k) != v) throw std::runtime_error("field \"" + k + "\" differs");
        kernels::GemmProbe p;
        p.fp32_gflops = j.at("fp32_gflops").get<double>();
        p.bf16_gflops = j.at("bf16_gflops").get<double>();
        p.bf16_path = j.at("bf16_path").get<std::string>();
        p.bf16_how = j.at("bf16_how").get<std::string>();
        p.threads = j.at("threads").get<int>();
        p.seconds = j.at("probe_s").get<double>();
        if (!(p.fp32_gflops > 0) || !(p.bf16_gflops > 0)) throw std::runtime_error("a rate is not positive");
        return p;
    } catch (const std::exception& e) {
        note =
            fmt::format("precision: the probe cache '{}' is unusable ({}); measured again", file.string(), e.what());
        return std::nullopt;
    }
}

void write_cache(const std::filesystem::path& file, nlohmann::ordered_json identity, const kernels::GemmProbe& p,
                 std::string& note) {
    identity["fp32_gflops"] = p.fp32_gflops;
    identity["bf16_gflops"] = p.bf16_gflops;
    identity["bf16_path"] = p.bf16_path;
    identity["bf16_how"] = p.bf16_how;
    identity["probe_s"] = p.seconds;
    identity["auto_takes"] = faster_precision(p.fp32_gflops, p.bf16_gflops);
    identity["measured_utc"] = utc_iso8601_now();
    try {
        make_dirs(file.parent_path());
        write_file_atomic(file, identity.dump(2) + "\n");
    } catch (const std::exception& e) {
        note = fmt::format("precision: the probe's figures were not cached ({})", e.what());
    }
}

std::string rates_text(const kernels::GemmProbe& p) {
    return fmt::format("fp32 {:.1f} GFLOP/s, bf16 {:.1f} GFLOP/s ({}) on this run's GEMM shapes, {} thread{}",
                       p.fp32_gflops, p.bf16_gflops, p.bf16_path, p.threads, p.threads == 1 ? "" : "s");
}

}  // namespace

std::string faster_precision(double fp32_gflops, double bf16_gflops) {
    return bf16_gflops >= kBf16Margin * fp32_gflops ? "bf16" : "fp32";
}

std::vector<kernels::GemmShape> probe_shapes(const config::Config& cfg) {
    const config::ModelConfig& m = cfg.model;
    if (m.is_classifier()) return {};
    const int64_t C = m.d_model, hd = m.head_dim > 0 ? m.head_dim : m.d_model / std::max(1, m.n_head);
    const int64_t F = m.d_ff > 0 ? m.d_ff : 4 * C, kv = m.n_kv_head > 0 ? m.n_kv_head : m.n_head;
    const int64_t rows = static_cast<int64_t>(cfg.trainer.micro_batch_size) * m.block_size;
    const bool frozen = cfg.lora.r > 0;  // LoRA: the base weights get no gradient GEMM
    struct Linear {
        int64_t out, in;
        double count;
        bool grad;
    };
    // Per layer: fused q|k|v, the attention output, the MLP's up projection (gate|up when gated), its down.
    const int64_t up = config::has_gated_mlp(m.arch) ? 2 * F : F;
    std::vector<Linear> layers = {{(m.n_head + 2 * kv) * hd, C, 1, !frozen}, {C, m.n_head * hd, 1, !frozen},
                                  {up, C, 1, !frozen}, {C, F, 1, !frozen}};
    for (Linear& l : layers) l.count = m.n_layer;
    // The head's weight: the embedding when tied (trained unless LoRA), lm_head otherwise.
    layers.push_back({m.padded_vocab_size(), C, 1, !frozen});
    int64_t probe_rows = std::min(rows, kMaxRows), cap = kMaxFeatures;
    auto build = [&] {
        std::vector<kernels::GemmShape> shapes;
        for (const Linear& l : layers) {
            const int64_t out = std::min(l.out, cap), in = std::min(l.in, cap);
            const double w = l.count * static_cast<double>(rows) / static_cast<double>(probe_rows) *
                             static_cast<double>(l.out) / static_cast<double>(out) * static_cast<double>(l.in) /
                             static_cast<double>(in);
            kernels::add_linear_gemms(shapes, probe_rows, out, in, w, l.grad);
        }
        return shapes;
    };
    auto pass_flops = [](const std::vector<kernels::GemmShape>& s) {
        double f = 0;
        for (const auto& g : s) f += g.flops();
        return f;
    };
    std::vector<kernels::GemmShape> shapes = build();
    // Over budget: fewer rows first, then narrower stand-ins.
    while (pass_flops(shapes) > kMaxPassFlops && (probe_rows / 2 >= kMinRows || cap / 2 >= kMinFeatures)) {
        if (probe_rows / 2 >= kMinRows) probe_rows /= 2;
        else cap /= 2;
        shapes = build();
    }
    return shapes;
}

std::filesystem::path precision_cache_file(const config::Config& cfg, const std::vector<kernels::GemmShape>& shapes) {
    const std::string key = sha256_hex(cache_identity(shapes).dump());
    return std::filesystem::path(cfg.data.cache_dir) / "cpu_precision" / (key.substr(0, 16) + ".json");
}

nlohmann::ordered_json PrecisionChoice::to_json() const {
    nlohmann::ordered_json j = {{"configured", configured}, {"chosen", precision}, {"reason", reason}};
    if (probe) {
        j["fp32_gflops"] = probe->fp32_gflops;
        j["bf16_gflops"] = probe->bf16_gflops;
        j["bf16_path"] = probe->bf16_path;
        j["bf16_how"] = probe->bf16_how;
        j["threads"] = probe->threads;
        j["probe_s"] = probe->seconds;
        j["cached"] = cached;
        j["cache_file"] = cache_file;
    }
    if (!warning.empty()) j["warning"] = warning;
    return j;
}

std::vector<std::string> PrecisionChoice::log_lines() const {
    std::vector<std::string> lines;
    if (!cache_note.empty()) lines.push_back(cache_note);
    lines.push_back(fmt::format("precision: {}{}: {}", configured, configured == precision ? "" : " -> " + precision,
                                reason));
    if (!warning.empty()) lines.push_back("warning: " + warning);
    return lines;
}

PrecisionChoice precision_from_rank0(const config::Config& cfg, const std::string& precision) {
    return {cfg.trainer.precision, precision, "rank 0's choice", std::nullopt, false, "", "", ""};
}

PrecisionChoice resolve_precision(const config::Config& cfg, Device device, const GemmProber& prober) {
    const std::string& want = cfg.trainer.precision;
    LLMT_CHECK(want == "fp32" || want == "bf16" || want == "auto",
               "trainer.precision: '{}' is not a precision (expected fp32, bf16 or auto)", want);
    PrecisionChoice c;
    c.configured = want;
    c.precision = want;
    c.reason = "as configured";
    const bool image = cfg.model.is_classifier();
    if (want == "fp32" || (want == "bf16" && (device != Device::kCpu || image))) return c;
    if (device != Device::kCpu) {
        c.precision = image ? "fp32" : "bf16";
        c.reason = image ? "the image classifiers' GPU kernels are fp32" : "on CUDA auto means bf16 (tensor cores)";
        return c;
    }
    if (image) {
        c.precision = "fp32";
        c.reason = "image classifiers keep fp32 on the CPU (the probe measures language models' linear layers; "
                   "their 3x3 convolutions run Winograd in fp32 only)";
        return c;
    }
    const std::vector<kernels::GemmShape> shapes = probe_shapes(cfg);
    const nlohmann::ordered_json identity = cache_identity(shapes);
    const std::filesystem::path file = precision_cache_file(cfg, shapes);
    c.cache_file = file.string();
    c.probe = read_cache(file, identity, c.cache_note);
    c.cached = c.probe.has_value();
    if (!c.probe) {
        c.probe = prober ? prober(shapes) : kernels::probe_gemm_rates(shapes);
        std::string note;
        write_cache(file, identity, *c.probe, note);
        if (!note.empty()) c.cache_note = note;
    }
    const std::string faster = faster_precision(c.probe->fp32_gflops, c.probe->bf16_gflops);
    const std::string measured = fmt::format("{} ({}, {})", rates_text(*c.probe),
                                             c.cached ? "cached in " + c.cache_file : "measured in " +
                                                 fmt::format("{:.2f} s", c.probe->seconds),
                                             c.probe->bf16_how);
    if (want == "bf16") {
        c.precision = "bf16";
        c.reason = "as configured; " + measured;
        if (c.probe->bf16_gflops < c.probe->fp32_gflops)
            c.warning = fmt::format("trainer.precision bf16 is slower than fp32 on this host: bf16 GEMMs {:.1f} "
                                    "GFLOP/s, fp32 {:.1f} GFLOP/s; running bf16 as asked (trainer.precision: auto "
                                    "or fp32 would be faster)",
                                    c.probe->bf16_gflops, c.probe->fp32_gflops);
        return c;
    }
    c.precision = faster;
    c.reason = fmt::format("{} is faster here{}; {}", faster,
                           faster == "fp32" ? fmt::format(" (bf16 is taken from {:.2f}x fp32's rate)", kBf16Margin)
                                            : std::string(),
                           measured);
    return c;
}

}  // namespace llmt::train
