// CUDA runtime glue (cuda/runtime.h).
#include "kernels/cuda/runtime.h"

#include <fmt/format.h>

#include <mutex>

#include "core/device_memory.h"
#include "core/error.h"
#include "core/knobs.h"

namespace llmt::kernels::cuda {

void throw_cuda_error(const char* call, cudaError_t err, const char* file, int line) {
    throw DeviceError(fmt::format("{} failed: {}: {} at {}:{}", call, cudaGetErrorName(err),
                                  cudaGetErrorString(err), file, line));
}

void throw_cublas_error(const char* call, cublasStatus_t st, const char* file, int line) {
    throw DeviceError(fmt::format("{} failed: cuBLAS status {} at {}:{}", call, static_cast<int>(st), file, line));
}

namespace {
bool sync_after_launch() { return knob_on(Knob::kCudaSync); }

struct Context {
    cudaStream_t stream = nullptr;
    cublasLtHandle_t lt = nullptr;
    void* workspace = nullptr;
};

constexpr size_t kWorkspaceBytes = size_t{32} << 20;

Context& context() {
    // Created once and never destroyed: the driver tears everything down at process exit, and
    // destroying it from a static destructor could run after the CUDA runtime has unloaded.
    static Context* ctx = [] {
        auto* c = new Context;
        LLMT_CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
        LLMT_CUBLAS_CHECK(cublasLtCreate(&c->lt));
        LLMT_CUDA_CHECK(cudaMalloc(&c->workspace, kWorkspaceBytes));
        return c;
    }();
    return *ctx;
}

void* device_alloc(size_t bytes) {
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, bytes);
    if (err != cudaSuccess) {
        size_t free_b = 0, total_b = 0;
        cudaGetLastError();  // clear the sticky-free allocation error before querying
        cudaMemGetInfo(&free_b, &total_b);
        throw DeviceError(fmt::format("cudaMalloc of {:.1f} MiB failed: {} ({:.1f} MiB free of {:.1f} MiB)",
                                      bytes / 1048576.0, cudaGetErrorString(err), free_b / 1048576.0,
                                      total_b / 1048576.0));
    }
    return p;
}

void device_free(void* p) noexcept { cudaFree(p); }

void device_zero(void* p, size_t bytes) {
    LLMT_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream()));
    LLMT_CUDA_CHECK(cudaStreamSynchronize(stream()));
}
}  // namespace

void check_launch(const char* kernel, const char* file, int line) {
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess && sync_after_launch()) err = cudaStreamSynchronize(stream());
    if (err != cudaSuccess) throw_cuda_error(kernel, err, file, line);
}

int device_count() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

cudaStream_t stream() { return context().stream; }
cublasLtHandle_t cublaslt() { return context().lt; }
void* cublaslt_workspace() { return context().workspace; }
size_t cublaslt_workspace_size() { return kWorkspaceBytes; }

void register_memory() {
    static std::once_flag once;
    std::call_once(once, [] {
        DeviceMemoryOps ops;
        ops.alloc = device_alloc;
        ops.free = device_free;
        ops.zero = device_zero;
        register_device_memory(Device::kCuda, ops);
    });
}

void copy(void* dst, const void* src, size_t bytes) {
    if (bytes == 0) return;
    LLMT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream()));
    LLMT_CUDA_CHECK(cudaStreamSynchronize(stream()));
}

void zero_async(void* p, size_t bytes) {
    if (bytes == 0) return;
    LLMT_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream()));
}

void synchronize() { LLMT_CUDA_CHECK(cudaStreamSynchronize(stream())); }

void memory_info(size_t* free_bytes, size_t* total_bytes) { LLMT_CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes)); }

}  // namespace llmt::kernels::cuda
