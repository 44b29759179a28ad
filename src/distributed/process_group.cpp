// ProcessGroup base and the backend factory.
#include "distributed/process_group.h"

#include <fmt/format.h>

#include <cstdlib>

#include "core/error.h"
#include "distributed/gloo_process_group.h"
#if LLMT_HAVE_NCCL
#include <cuda_runtime_api.h>

#include "distributed/nccl_process_group.h"
#include "kernels/cuda/runtime.h"
#endif

namespace llmt::dist {

ProcessGroup::~ProcessGroup() = default;

void ProcessGroup::allreduce_async(Tensor t, ReduceOp) {
    throw InternalError(fmt::format("allreduce_async of {}: the {} backend has no device streams (use allreduce)",
                                 t.describe(), backend()));
}

void ProcessGroup::allgather_async(Tensor out, Tensor) {
    throw InternalError(fmt::format("allgather_async into {}: the {} backend has no device streams (use allgather)",
                                    out.describe(), backend()));
}

void ProcessGroup::join_async() {
    throw InternalError(fmt::format("join_async: the {} backend has no device streams", backend()));
}

bool nccl_available() { return LLMT_HAVE_NCCL != 0; }

void use_gpu_of_local_rank(int local_rank) {
#if LLMT_HAVE_NCCL
    const int n = kernels::cuda::device_count();
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    LLMT_CHECK(
        local_rank >= 0 && local_rank < n,
        "LOCAL_RANK={} but this process sees {} GPU{}{}: the nccl backend uses GPU LOCAL_RANK, so start at most "
        "{} workers per node (llmtrain launch --nproc-per-node {})",
        local_rank, n, n == 1 ? "" : "s", visible ? fmt::format(" (CUDA_VISIBLE_DEVICES={})", visible) : std::string(),
        n, n);
    LLMT_CUDA_CHECK(cudaSetDevice(local_rank));
#else
    throw DeviceError(fmt::format("LOCAL_RANK={}: this llmtrain was built without CUDA (LLMTRAIN_CUDA=OFF)",
                                  local_rank));
#endif
}

std::unique_ptr<ProcessGroup> make_process_group(const std::string& backend, Store& store, int rank, int size,
                                                 std::chrono::milliseconds timeout) {
    if (backend == "gloo") return std::make_unique<GlooProcessGroup>(store, rank, size, timeout);
#if LLMT_HAVE_NCCL
    if (backend == "nccl") return std::make_unique<NcclProcessGroup>(store, rank, size, timeout);
#else
    if (backend == "nccl")
        throw DeviceError("dist.backend nccl: this llmtrain was built without CUDA (LLMTRAIN_CUDA=OFF), so it has "
                          "no NCCL process group; use dist.backend: gloo with run.device: cpu");
#endif
    throw ConfigError("dist.backend: unknown backend '" + backend + "' (expected gloo or nccl)");
}

}  // namespace llmt::dist
