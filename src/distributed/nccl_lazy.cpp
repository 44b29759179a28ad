// NCCL loaded on first use (core/lazy_library.h): the binary does not link libnccl (220 MB), so only a
// process that builds an NCCL process group loads it. Each function nccl_process_group.cpp calls is
// defined here with nccl.h's prototype and forwards to the library's.
#include <nccl.h>

#include "core/lazy_library.h"

namespace {


const llmt::LazyLibrary& nccl_library() {
    // The soname of the major version the header declares, then the directory found at build time.
    static const llmt::LazyLibrary lib(
        {"libnccl.so." LLMT_LAZY_STR(NCCL_MAJOR), LLMT_NCCL_LIBRARY_DIR "/libnccl.so." LLMT_LAZY_STR(NCCL_MAJOR)},
        "NCCL " LLMT_LAZY_STR(NCCL_MAJOR), "install NCCL (libnccl2) or put its directory on LD_LIBRARY_PATH");
    return lib;
}

}  // namespace

LLMT_LAZY_FUNCTION(nccl_library(), ncclResult_t, ncclGetUniqueId, (ncclUniqueId * id), (id))
LLMT_LAZY_FUNCTION(nccl_library(), ncclResult_t, ncclCommInitRankConfig,
                   (ncclComm_t * comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config),
                   (comm, nranks, id, rank, config))
LLMT_LAZY_FUNCTION(nccl_library(), ncclResult_t, ncclCommFinalize, (ncclComm_t comm), (comm))
LLMT_LAZY_FUNCTION(nccl_library(), ncclResult_t, ncclCommDestroy, (ncclComm_t comm), (comm))
LLMT_LAZY_FUNCTION(nccl_library(), ncclResult_t, ncclCommAbort, (ncclComm_t comm), (comm))
LLMT_LAZY_FUNCTION(nccl_library(), ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t * err),
                   (comm, err))
LLMT_LAZY_FUNCTION(nccl_library(), const char*, ncclGetErrorString, (ncclResult_t result), (result))
LLMT_LAZY_FUNCTION(nccl_library(), const char*, ncclGetLastError, (ncclComm_t comm), (comm))
LLMT_LAZY_FUNCTION(nccl_library(), ncclResult_t, ncclAllReduce,
                   (const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                    cudaStream_t stream),
                   (send, recv, count, type, op, comm, stream))
LLMT_LAZY_FUNCTION(nccl_library(), ncclResult_t, ncclReduceScatter,
                   (const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                    cudaStream_t stream),
                   (send, recv, count, type, op, comm, stream))
LLMT_LAZY_FUNCTION(nccl_library(), ncclResult_t, ncclAllGather,
                   (const void* send, void* recv, size_t count, ncclDataType_t type, ncclComm_t comm,
                    cudaStream_t stream),
                   (send, recv, count, type, comm, stream))
LLMT_LAZY_FUNCTION(nccl_library(), ncclResult_t, ncclBroadcast,
                   (const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                    cudaStream_t stream),
                   (send, recv, count, type, root, comm, stream))
