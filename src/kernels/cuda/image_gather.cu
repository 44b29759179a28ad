// Images gathered from a byte table on the device (cuda/image_gather.h): one thread per output value, the
// lookup table staged in shared memory.
#include <cstring>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/image_gather.h"
#include "kernels/cuda/runtime.h"

namespace llmt::kernels::cuda {
namespace {

constexpr int kBlock = 256;

struct Lut {
    float v[256];
};

__global__ void gather_images_kernel(float* out, ImageTable t, const ImageRef* refs, int n, Lut lut) {
    __shared__ float table[256];
    table[threadIdx.x] = lut.v[threadIdx.x];  // kBlock == 256: one entry per thread
    __syncthreads();
    const int per_image = t.H * t.W * t.C;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const int b = i / per_image, p = i - b * per_image;
        const int c = p % t.C, x = (p / t.C) % t.W, y = p / (t.C * t.W);
        const ImageRef r = refs[b];
        const int sy = y + r.dy, sx = (r.flip ? t.W - 1 - x : x) + r.dx;
        uint8_t v = 0;
        if (r.index >= 0 && sy >= 0 && sy < t.H && sx >= 0 && sx < t.W)
            v = t.pixels[static_cast<long>(r.index) * per_image + (sy * t.W + sx) * t.C + c];
        out[i] = table[v];
    }
}

}  // namespace

void gather_images(float* out, const ImageTable& table, const ImageRef* refs, int B, const float* lut,
                   cudaStream_t stream) {
    static_assert(kBlock == 256, "the kernel stages the table with one thread per entry");
    const long n = static_cast<long>(B) * table.H * table.W * table.C;
    if (n == 0) return;
    Lut l;
    std::memcpy(l.v, lut, sizeof l.v);
    gather_images_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(out, table, refs, static_cast<int>(n), l);
    LLMT_CUDA_CHECK_LAUNCH("gather_images_kernel");
}

}  // namespace llmt::kernels::cuda
