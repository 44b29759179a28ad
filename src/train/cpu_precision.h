// trainer.precision as a run takes it. fp32 and bf16 run as written. auto: bf16 on CUDA (fp32 for the image
// classifiers, whose kernels are fp32); on the CPU, whichever of fp32 and bf16 GEMMs the probe
// (kernels/gemm_probe.h) measures faster on the run's own linear-layer GEMM shapes, bf16 only when it is at
// least kBf16Margin faster (a tie keeps fp32's numerics). The probe's figures are cached per CPU model, GEMM
// library versions, llmtrain version, thread count and shapes in <data.cache_dir>/cpu_precision/, so
// a host measures once. An explicit bf16 that the probe measures slower runs as asked, with a warning that
// gives both rates. docs/config.md ("trainer.precision: auto") and docs/benchmarks.md have the figures.
// Thread safety: resolve_precision runs GEMMs on the OpenMP threads in effect; call it from one thread.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/tensor.h"
#include "kernels/gemm_probe.h"

namespace llmt::train {

// bf16 must be this much faster than fp32 (rate ratio) for auto to take it.
inline constexpr double kBf16Margin = 1.05;

// "bf16" when bf16_gflops >= kBf16Margin x fp32_gflops, else "fp32".
std::string faster_precision(double fp32_gflops, double bf16_gflops);

struct PrecisionChoice {
    std::string configured;                   // trainer.precision as written
    std::string precision;                    // what runs: "fp32" | "bf16"
    std::string reason;                       // why, one clause for the log
    std::optional<kernels::GemmProbe> probe;  // CPU language models with auto or bf16
    bool cached = false;                      // the probe's figures came from cache_file
    std::string cache_file;
    std::string cache_note;                   // a cache that could not be read or written, for the log
    std::string warning;                      // explicit bf16 that the probe measures slower; else empty

    // {"configured", "chosen", "reason", and with a probe "fp32_gflops", "bf16_gflops", "bf16_path", ...}
    nlohmann::ordered_json to_json() const;
    // "precision: auto -> fp32 (...)" and, when set, the cache note and the warning.
    std::vector<std::string> log_lines() const;
};

// The probe's GEMMs for cfg's model: every linear layer's three GEMMs (two under LoRA, whose base is frozen)
// at micro_batch_size x block_size rows, and the LM head's; large ones replaced by stand-ins of at most 2048
// rows and 4096 input and output features, whose weights keep the step's FLOPs, then rows halved (not below
// 256) and features halved (not below 1024) until one pass is at most 24 GFLOP per precision. Empty for image
// classifiers.
std::vector<kernels::GemmShape> probe_shapes(const config::Config& cfg);

// The cache file of cfg's shapes on this host at the thread count in effect (loads the GEMM libraries to
// read their versions).
std::filesystem::path precision_cache_file(const config::Config& cfg, const std::vector<kernels::GemmShape>& shapes);

using GemmProber = std::function<kernels::GemmProbe(const std::vector<kernels::GemmShape>&)>;

// The precision cfg runs in on `device`. On the CPU with auto or bf16 for a language model: the cached figures
// when the cache has this host's, else `prober` (empty: kernels::probe_gemm_rates) and the cache written; a
// cache that cannot be read or written is measured again / left, and said in cache_note. Throws InputError for
// a precision this version does not know.
PrecisionChoice resolve_precision(const config::Config& cfg, Device device, const GemmProber& prober = {});

// A rank other than 0 runs rank 0's choice (`precision`).
PrecisionChoice precision_from_rank0(const config::Config& cfg, const std::string& precision);

}  // namespace llmt::train
