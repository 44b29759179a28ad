// Device, precision and memory of a run before allocation (run_plan.h).
#include "train/run_plan.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "core/check.h"
#include "core/error.h"
#include "kernels/ops.h"
#include "models/registry.h"
#include "train/zero_scale.h"

namespace llmt::train {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// MemAvailable of /proc/meminfo in bytes, else physical RAM (sysconf).
std::uint64_t host_available_bytes() {
    std::ifstream in("/proc/meminfo");
    std::string line;
    while (std::getline(in, line)) {  // "MemAvailable:   21757996 kB"
        unsigned long long kib = 0;
        if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kib) == 1) return kib * 1024;
    }
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) : 0;
}

}  // namespace

// run.device: cuda (a usable GPU required; under data parallelism one per local rank, GPU LOCAL_RANK, which
// DistContext checks), auto (the GPU when every local rank gets one), or cpu.
Device resolve_device(const config::Config& cfg, int local_world) {
    if (cfg.run.device == "cpu") return Device::kCpu;  // without asking the driver: a CPU run never starts CUDA
    const int gpus = kernels::device_count(Device::kCuda);
    if (cfg.run.device == "cuda") {
        if (gpus == 0)
            throw InputError("run.device: cuda: no usable CUDA device (this binary is built without CUDA, or no GPU "
                             "or driver is present); use run.device: cpu or auto");
        return Device::kCuda;
    }
    if (cfg.run.device == "auto" && gpus > 0 && gpus >= local_world) return Device::kCuda;
    return Device::kCpu;
}

namespace {
// trainer.precision on CUDA: bf16 as written, or auto for a language model (train/cpu_precision.h).
bool cuda_bf16(const config::Config& cfg) {
    return cfg.trainer.precision == "bf16" || (cfg.trainer.precision == "auto" && !cfg.model.is_classifier());
}
}  // namespace

// The model's compute precision on `device` (trainer.precision); what this version cannot do is refused.
DType check_supported(const config::Config& cfg, Device device) {
    if (device == Device::kCpu) {
        // bf16 on the CPU is a GEMM precision (kernels/cpu/matmul.h): tensors stay fp32 in memory.
        LLMT_CHECK(
            cfg.trainer.precision == "fp32" || cfg.trainer.precision == "bf16" || cfg.trainer.precision == "auto",
            "trainer.precision: {} is not available on the CPU; use fp32, bf16 or auto", cfg.trainer.precision);
        return DType::kF32;
    }
    // run.device: cuda is refused by validation (config/loader.cpp); auto lands here when a GPU is present.
    LLMT_CHECK(!cfg.run.deterministic,
               "run.deterministic: true cannot be honoured on CUDA (run.device: {} resolved to cuda; the GPU kernels "
               "accumulate with float atomics and cuBLASLt chooses GEMM algorithms by timing); use run.device: cpu "
               "for bit-reproducible runs, or run.deterministic: false",
               cfg.run.device);
    LLMT_CHECK(cfg.trainer.precision == "fp32" || cfg.trainer.precision == "bf16" || cfg.trainer.precision == "auto",
               "trainer.precision: {} is not available on CUDA; use bf16, fp32 or auto", cfg.trainer.precision);
    return cuda_bf16(cfg) ? DType::kBF16 : DType::kF32;
}

MemoryEstimate estimate_training_memory(const config::Config& cfg, Device device, DType dtype, int zero1_world,
                                        int zero3_world) {
    const auto plan =
        models::plan_model_memory(cfg, device, dtype, cfg.trainer.micro_batch_size, cfg.model.block_size);
    MemoryEstimate e;
    e.parameters = plan.params;
    e.gradients = plan.grads;
    if (zero3_world > 1 && cfg.lora.r > 0) {
        // ZeRO-3 under LoRA: the frozen base (its compute-dtype weights, all of plan.params but the adapters')
        // divided, plus the four gather buffers' weights (no gradients); the adapters, their gradients and
        // optimizer state whole, as under DDP.
        config::Config base = cfg;
        base.lora.r = 0;
        const ScaleModel s = scale_model(base);
        const std::uint64_t elem = dtype == DType::kBF16 ? 2 : 4;
        const auto whole = static_cast<std::uint64_t>(s.parameters) * elem;
        const auto held = static_cast<std::uint64_t>(s.embedding * (s.tied ? 1 : 2) + 2 * s.largest_layer);
        e.parameters =
            plan.params - std::min(plan.params, whole) + (whole + zero3_world - 1) / zero3_world + held * elem;
    } else if (zero3_world > 1) {
        // ZeRO-3 (zero_scale.h's stage 3, the same arithmetic): the rank's chunks of the fp32 masters and of the
        // gradient accumulator (as many bytes as the fp32 gradient arena over the world), and the four gather
        // buffers (train/zero3_gather.h): compute weights and an fp32 gradient for the embeddings' unit, the
        // final unit and two blocks (computing, prefetched). Nothing is ever whole, so no start-up peak.
        const ScaleModel s = scale_model(cfg);
        const auto chunks = (plan.grads + static_cast<std::uint64_t>(zero3_world) - 1) / zero3_world;
        const auto held = static_cast<std::uint64_t>(s.embedding * (s.tied ? 1 : 2) + 2 * s.largest_layer);
        e.parameters = chunks + held * (dtype == DType::kBF16 ? 2 : 4);
        e.gradients = chunks + held * 4;
        zero1_world = zero3_world;  // the optimizer state divides as under ZeRO-1
    }
    const auto world = static_cast<std::uint64_t>(zero1_world);
    if (dtype == DType::kBF16 && zero1_world > 1 && zero3_world <= 1) {
        // The trained arena's fp32 masters (as many bytes as its gradients) sharded; the bf16 copy stays whole.
        e.parameters = plan.params - plan.grads + (plan.grads + world - 1) / world;
        e.build_peak = plan.params + plan.grads;
    }
    // AdamW's m and v in fp32, one each per fp32 master parameter (the grads arena has the same layout);
    // SGD's momentum buffer, one (none with momentum 0).
    const int per_param = cfg.trainer.optimizer == "sgd" ? (cfg.trainer.momentum != 0 ? 1 : 0) : 2;
    const std::uint64_t moments = per_param * static_cast<std::uint64_t>(plan.grads);
    e.optimizer = (moments + world - 1) / world;
    e.activations = plan.activations;
    const std::uint64_t parts[] = {e.parameters, e.gradients, e.optimizer, e.activations};
    std::uint64_t sum = 0;
    for (std::uint64_t p : parts)
        LLMT_CHECK(!__builtin_add_overflow(sum, p, &sum), "model: the memory needed overflows 64-bit sizes");
    return e;
}

MemoryLimit memory_limit(Device device, std::optional<std::uint64_t> max_memory) {
    if (max_memory) return {*max_memory, "--max-memory"};
    if (device == Device::kCuda) return {kernels::device_memory_info(device).total, "GPU memory"};
    return {host_available_bytes(), "MemAvailable of this host"};
}

void check_memory(const MemoryEstimate& est, const MemoryLimit& limit, const config::Config& cfg) {
    if (limit.bytes == 0 || est.peak() <= limit.bytes) return;  // 0: unknown, nothing to compare with
    const std::string build =
        est.peak() > est.total() ? fmt::format("; {:.2f} GiB while the model is built, before the fp32 masters are "
                                               "sharded", est.build_peak / kGiB)
                                 : std::string();
    throw InputError(fmt::format(
        "model does not fit: training needs {:.2f} GiB per process (parameters {:.2f}, gradients {:.2f}, optimizer "
        "state {:.2f}, activations {:.2f} at micro_batch_size {} x block_size {}, recompute {}, precision {}{}) but "
        "{} is {:.2f} GiB\n(hint: lower model.n_layer / model.d_model, trainer.micro_batch_size or model.block_size, "
        "set trainer.recompute: all, or raise --max-memory)",
        est.total() / kGiB, est.parameters / kGiB, est.gradients / kGiB, est.optimizer / kGiB,
        est.activations / kGiB, cfg.trainer.micro_batch_size, cfg.model.block_size, cfg.trainer.recompute,
        cfg.trainer.precision, build, limit.source, limit.bytes / kGiB));
}

MemoryCheck check_config_memory(const config::Config& cfg, std::optional<std::uint64_t> max_memory, int world) {
    const bool gpu = cfg.run.device != "cpu" && kernels::device_count(Device::kCuda) > 0;
    const Device device = gpu || cfg.run.device == "cuda" ? Device::kCuda : Device::kCpu;
    const DType dtype = device == Device::kCuda && cuda_bf16(cfg) ? DType::kBF16 : DType::kF32;
    MemoryCheck c;
    c.estimate = estimate_training_memory(cfg, device, dtype, cfg.dist.zero_stage == 1 && world > 1 ? world : 1,
                                          cfg.dist.zero_stage == 3 && world > 1 ? world : 1);
    if (gpu || device == Device::kCpu) c.limit = memory_limit(device, max_memory);
    else if (max_memory) c.limit = {*max_memory, "--max-memory"};
    check_memory(c.estimate, c.limit, cfg);
    return c;
}

std::uint64_t parse_memory_size(std::string_view text) {
    auto bad = [&] {
        return UsageError(fmt::format("--max-memory: '{}' is not a size; expected e.g. 64GiB, 512M, 1.5TB or a "
                                      "number of bytes",
                                      text));
    };
    std::size_t i = 0;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
    if (i == 0) throw bad();
    double value = 0;
    try {
        std::size_t used = 0;
        value = std::stod(std::string(text.substr(0, i)), &used);
        if (used != i) throw bad();
    } catch (const std::logic_error&) {
        throw bad();
    }
    std::string unit;
    for (char c : text.substr(i))
        if (c != ' ') unit += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    double scale = 0;
    const char* const kUnits = "KMGTP";
    if (unit.empty() || unit == "B") {
        scale = 1;
    } else {
        const char* u = std::strchr(kUnits, unit[0]);
        if (!u || unit[0] == '\0') throw bad();
        const int power = static_cast<int>(u - kUnits) + 1;
        const std::string rest = unit.substr(1);
        if (rest.empty() || rest == "IB" || rest == "I") scale = std::pow(1024.0, power);
        else if (rest == "B") scale = std::pow(1000.0, power);
        else throw bad();
    }
    const double bytes = value * scale;
    if (!(bytes >= 1) || bytes >= 1.8e19) throw bad();
    return static_cast<std::uint64_t>(bytes);
}

}  // namespace llmt::train
