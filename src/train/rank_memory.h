// The memory one rank holds, for the step log, metrics.jsonl and summary.json (docs/distributed.md,
// "Figures per rank"): on the CPU the process's peak resident set (VmHWM of /proc/self/status), on a GPU
// the device memory in use (total - free; one process per GPU).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace llmt::train {

// Bytes; 0 when the figure cannot be read (no /proc). Thread-safe.
std::uint64_t rank_memory_bytes(Device device);

// "peak RSS" or "GPU memory in use": what rank_memory_bytes measures on `device`, for the log.
const char* rank_memory_what(Device device);

}  // namespace llmt::train
