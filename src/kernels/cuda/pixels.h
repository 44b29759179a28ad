// Image bytes to fp32 inputs on CUDA, same semantics as cpu/pixels.h: a table lookup per pixel (the
// 256-entry table travels as a kernel argument), so the values equal the CPU's bit for bit.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace llmt::kernels::cuda {

// out[i] = table[pixels[i] & 255]; out, pixels on the device, table (256 floats) in host memory.
void normalize_pixels(float* out, const int32_t* pixels, size_t n, const float* table, cudaStream_t stream);

}  // namespace llmt::kernels::cuda
