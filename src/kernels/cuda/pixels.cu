#include <cstring>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/pixels.h"
#include "kernels/cuda/runtime.h"

namespace llmt::kernels::cuda {
namespace {

constexpr int kBlock = 256;

struct PixelTable {
    float v[256];
};

__global__ void normalize_pixels_kernel(float* out, const int32_t* pixels, long n, PixelTable table) {
    __shared__ float t[256];
    t[threadIdx.x] = table.v[threadIdx.x];  // kBlock == 256: one entry per thread
    __syncthreads();
    for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<long>(gridDim.x) * blockDim.x)
        out[i] = t[pixels[i] & 255];
}

}  // namespace

void normalize_pixels(float* out, const int32_t* pixels, size_t n, const float* table, cudaStream_t stream) {
    static_assert(kBlock == 256, "the kernel stages the table with one thread per entry");
    if (n == 0) return;
    PixelTable t;
    std::memcpy(t.v, table, sizeof t.v);
    const long count = static_cast<long>(n);
    normalize_pixels_kernel<<<grid_for(count, kBlock), kBlock, 0, stream>>>(out, pixels, count, t);
    LLMT_CUDA_CHECK_LAUNCH("normalize_pixels_kernel");
}

}  // namespace llmt::kernels::cuda
