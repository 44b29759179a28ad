// Device memory hook: core allocates Arena buffers on a device through functions a backend registers
// (kernels/cuda registers cudaMalloc/cudaFree/cudaMemset), so core itself includes no device headers.
// Thread safety: register once at start-up (static initialisation); lookups are read-only afterwards.
#pragma once

#include <cstddef>

#include "core/tensor.h"

namespace llmt {

struct DeviceMemoryOps {
    void* (*alloc)(size_t bytes) = nullptr;  // throws DeviceError on failure; never returns null
    void (*free)(void* p) noexcept = nullptr;
    void (*zero)(void* p, size_t bytes) = nullptr;  // synchronous with respect to the host
};

// Registers the memory functions of a non-CPU device (a second call replaces the first).
void register_device_memory(Device device, const DeviceMemoryOps& ops);

// The registered functions; throws DeviceError naming the device when none are registered (a build
// without that backend).
const DeviceMemoryOps& device_memory(Device device);

}  // namespace llmt
