// ProcessGroup base and the backend factory.
#include "dist/process_group.h"

#include "core/error.h"
#include "dist/gloo_process_group.h"

namespace llmt::dist {

ProcessGroup::~ProcessGroup() = default;

std::unique_ptr<ProcessGroup> make_process_group(const std::string& backend, Store& store, int rank, int size,
                                                 std::chrono::milliseconds timeout) {
    if (backend == "gloo") return std::make_unique<GlooProcessGroup>(store, rank, size, timeout);
    if (backend == "nccl") throw DeviceError("dist.backend nccl: this build has no NCCL process group yet");
    throw ConfigError("dist.backend: unknown backend '" + backend + "' (expected gloo or nccl)");
}

}  // namespace llmt::dist
