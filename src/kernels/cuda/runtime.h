// CUDA runtime glue for the CUDA backend: checked calls (every CUDA / cuBLASLt status, and the last error
// after each kernel launch, becomes a DeviceError naming the call and file:line), the stream and cuBLASLt
// handle the kernels run on, device memory for core's Arena, and host<->device copies.
// Host-only header (no device code), includable from .cu and .cpp files.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>

namespace llmt::kernels::cuda {

// Throws DeviceError("<call> failed: <name>: <message> at <file>:<line>").
[[noreturn]] void throw_cuda_error(const char* call, cudaError_t err, const char* file, int line);
[[noreturn]] void throw_cublas_error(const char* call, cublasStatus_t st, const char* file, int line);

#define LLMT_CUDA_CHECK(call)                                                                       \
    do {                                                                                            \
        const cudaError_t llmt_err_ = (call);                                                       \
        if (llmt_err_ != cudaSuccess) ::llmt::kernels::cuda::throw_cuda_error(#call, llmt_err_, __FILE__, __LINE__); \
    } while (0)

#define LLMT_CUBLAS_CHECK(call)                                                                     \
    do {                                                                                            \
        const cublasStatus_t llmt_st_ = (call);                                                     \
        if (llmt_st_ != CUBLAS_STATUS_SUCCESS)                                                      \
            ::llmt::kernels::cuda::throw_cublas_error(#call, llmt_st_, __FILE__, __LINE__);         \
    } while (0)

// After every <<<...>>>: launch-configuration errors and earlier asynchronous faults surface here.
// LLMTRAIN_CUDA_SYNC=1 also synchronises, so a fault is reported at the kernel that caused it.
#define LLMT_CUDA_CHECK_LAUNCH(name) ::llmt::kernels::cuda::check_launch(name, __FILE__, __LINE__)
void check_launch(const char* kernel, const char* file, int line);

// Number of usable CUDA devices (0 when there is no driver or no GPU; never throws).
int device_count();

// The stream every kernel of this backend runs on (created on first use on the current device).
cudaStream_t stream();
// cuBLASLt handle and its workspace (32 MiB, allocated on first use).
cublasLtHandle_t cublaslt();
void* cublaslt_workspace();
size_t cublaslt_workspace_size();

// Registers cudaMalloc/cudaFree/cudaMemset as core's DeviceMemoryOps for Device::kCuda (idempotent).
void register_memory();

// Copies between host and device (or device and device) on stream(), synchronously.
void copy(void* dst, const void* src, size_t bytes);
// Zeroes bytes at a device pointer on stream(), asynchronously (ordered with the kernels).
void zero_async(void* p, size_t bytes);
// Blocks until the stream's work is done (DeviceError on an asynchronous fault).
void synchronize();
// Free and total bytes of the current device's memory.
void memory_info(size_t* free_bytes, size_t* total_bytes);

}  // namespace llmt::kernels::cuda
