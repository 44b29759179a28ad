// kernels/ops.h gather_images on CUDA, same semantics as cpu/image_gather.h (the same lookup table, so the
// values are the CPU's bit for bit).
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/image_refs.h"

namespace llmt::kernels::cuda {

// out, refs and table.pixels on the device; lut (256 floats) in host memory (passed by value).
void gather_images(float* out, const ImageTable& table, const ImageRef* refs, int B, const float* lut,
                   cudaStream_t stream);

}  // namespace llmt::kernels::cuda
