// What a run of a config needs before anything is allocated: the device and precision it resolves to,
// the model's configuration, and the memory one process uses (parameters, gradients, optimizer state,
// activations), checked against the device or --max-memory. `validate`, `train --dry-run` and `train`
// all refuse a run that cannot fit here, with the figures, instead of failing in an allocation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "config/config.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace llmt::train {

// run.device: cuda (a usable GPU required; under data parallelism one per local rank), auto (the GPU
// when every local rank gets one), or cpu (the driver is never asked). Throws InputError.
Device resolve_device(const config::Config& cfg, int local_world);
// The model's compute precision on `device` (trainer.precision); what this version cannot do is
// refused with InputError naming the key.
DType check_supported(const config::Config& cfg, Device device);

// Bytes one training process holds. Under bf16 `parameters` counts the fp32 master weights and their
// bf16 compute copy; `optimizer` is AdamW's two fp32 moments or SGD's momentum buffer (sharded over the
// ranks under ZeRO-1, and under ZeRO-1 with bf16 the fp32 masters too: ParamStore::shard_masters).
// build_peak: what the process holds while the model is built, before the masters are sharded and the
// optimizer state and activations allocated (the whole fp32 arena, the bf16 copy and the gradients);
// 0 when that is not more than the steady state.
struct MemoryEstimate {
    std::uint64_t parameters = 0, gradients = 0, optimizer = 0, activations = 0;
    std::uint64_t build_peak = 0;
    std::uint64_t total() const { return parameters + gradients + optimizer + activations; }
    std::uint64_t peak() const { return total() > build_peak ? total() : build_peak; }
};
// Throws InputError when the model's sizes are invalid or overflow 64 bits. zero1_world: the ranks of a
// ZeRO-1 job (1: no ZeRO-1), over which the optimizer state and, under bf16, the fp32 masters are
// sharded (the largest rank's shard: the arena divided by the world, rounded up). zero3_world: the ranks
// of a ZeRO-3 job (1: none): masters, gradients and optimizer state divided, plus the gathered units
// (zero_scale.h's stage-3 arithmetic).
MemoryEstimate estimate_training_memory(const config::Config& cfg, Device device, DType dtype, int zero1_world = 1,
                                        int zero3_world = 1);

// What one process may use: --max-memory when given, else the GPU's total memory (CUDA) or this host's
// MemAvailable (CPU; physical RAM when /proc/meminfo cannot be read).
struct MemoryLimit {
    std::uint64_t bytes = 0;
    std::string source;  // "--max-memory", "GPU memory", "MemAvailable of this host"
};
MemoryLimit memory_limit(Device device, std::optional<std::uint64_t> max_memory);

// Throws InputError naming every figure in GiB when est.peak() > limit.bytes.
void check_memory(const MemoryEstimate& est, const MemoryLimit& limit, const config::Config& cfg);

// `llmtrain validate`'s check, on the device cfg would use on this machine without starting a run: a
// run.device: cuda config on a host without a GPU is checked against --max-memory only. Throws
// InputError (check_memory's) when it does not fit.
struct MemoryCheck {
    MemoryEstimate estimate;
    MemoryLimit limit;  // bytes 0: nothing to compare with
};
// world: the ranks of the job (validate --world-size), which ZeRO-1 (dist.zero_stage: 1) shards over.
MemoryCheck check_config_memory(const config::Config& cfg, std::optional<std::uint64_t> max_memory, int world = 1);

// "80GiB", "80G", "512MiB", "1.5TB", "1073741824" (G/GiB and friends are powers of 1024; GB and
// friends powers of 1000). Throws UsageError naming --max-memory for anything else or 0.
std::uint64_t parse_memory_size(std::string_view text);

}  // namespace llmt::train
