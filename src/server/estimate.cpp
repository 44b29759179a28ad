// Placeholder estimate (see estimate.h): training FLOPs = 6 x parameters x tokens (Kaplan et al. 2020,
// "Scaling Laws", eq. 2.1) at an assumed sustained rate per rank, perfect scaling. Not measured.
#include "server/estimate.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/fs.h"

namespace llmt::server {

namespace {
// Assumed sustained FLOP/s per rank. Labelled as assumptions in every response.
constexpr double kCpuFlops = 20e9;   // one CPU rank (a few AVX2 cores)
constexpr double kGpuFlops = 100e12;  // one GPU rank in bf16 at ~40% MFU of an H100-class card
}  // namespace

Rates load_rates(const std::filesystem::path& path) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(read_file(path, 1 << 20));
    } catch (const nlohmann::json::exception& e) {
        throw InputError(fmt::format("{}: not valid JSON: {}", path.string(), e.what()));
    }
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
            throw InputError(fmt::format("{}: unknown key '{}' (expected cpu_hour_usd, gpu_hour_usd)", path.string(), k));
    }
    return r;
}

nlohmann::json estimate_job(const JobSpec& spec, const config::Config& cfg, const Rates& rates) {
    const auto& m = cfg.model;
    const double d = m.d_model, L = m.n_layer, V = m.padded_vocab_size(), T = m.block_size;
    const double d_ff = m.d_ff > 0 ? m.d_ff : 4 * d;
    // Attention (4 d^2) + MLP (2 d d_ff) per layer, plus token and position embeddings.
    const double params = L * (4 * d * d + 2 * d * d_ff) + V * d + T * d;
    const int world = spec.cpus();
    const double tokens = static_cast<double>(cfg.trainer.max_steps) * cfg.trainer.micro_batch_size *
                          cfg.trainer.grad_accum_steps * T * world;
    const bool gpu = spec.gpus_per_node > 0;
    const double rate = (gpu ? kGpuFlops : kCpuFlops) * world;
    const double seconds = 6 * params * tokens / rate;
    const double device_hours = seconds / 3600 * (gpu ? spec.gpus() : world);
    const double cost = device_hours * (gpu ? rates.gpu_hour_usd : rates.cpu_hour_usd);
    return {{"source", "placeholder"},
            {"parameters", params},
            {"tokens", tokens},
            {"max_steps", cfg.trainer.max_steps},
            {"world_size", world},
            {"duration_s", seconds},
            {"device_hours", device_hours},
            {"device_kind", gpu ? "gpu" : "cpu"},
            {"cost_usd", cost},
            {"assumptions", fmt::format("6*params*tokens FLOPs at {:.0e} FLOP/s per {} rank, perfect scaling; "
                                        "not measured (placeholder until measured throughput rows exist)",
                                        gpu ? kGpuFlops : kCpuFlops, gpu ? "GPU" : "CPU")}};
}

}  // namespace llmt::server
