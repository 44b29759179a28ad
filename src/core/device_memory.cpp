// Registry of device memory functions (core/device_memory.h).
#include "core/device_memory.h"

#include <fmt/format.h>

#include <array>

#include "core/error.h"

namespace llmt {
namespace {
std::array<DeviceMemoryOps, 2>& registry() {
    static std::array<DeviceMemoryOps, 2> r{};
    return r;
}
}  // namespace

void register_device_memory(Device device, const DeviceMemoryOps& ops) {
    registry()[static_cast<size_t>(device)] = ops;
}

const DeviceMemoryOps& device_memory(Device device) {
    const DeviceMemoryOps& ops = registry()[static_cast<size_t>(device)];
    if (!ops.alloc)
        throw DeviceError(fmt::format("no memory functions registered for device '{}' (built without its backend?)",
                                      device_name(device)));
    return ops;
}

}  // namespace llmt
