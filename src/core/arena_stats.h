// The bytes Arena buffers hold per device, now and at their peak since the last reset: the allocator-side
// figure the memory plan (models/model.h MemoryPlan, `llmtrain validate`) is checked against in tests.
// Counts Arena buffers only (every parameter, gradient, activation and GPU optimizer-state buffer is one).
// Thread safety: safe from any thread.
#pragma once

#include <cstddef>

#include "core/tensor.h"  // Device

namespace llmt {

struct ArenaBytes {
    size_t live = 0, peak = 0;
};

ArenaBytes arena_bytes(Device device);
// Sets the device's peak to what is live now.
void reset_arena_peak(Device device);

}  // namespace llmt
