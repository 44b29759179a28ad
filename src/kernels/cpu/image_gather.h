// kernels/ops.h gather_images on the CPU (OpenMP over images).
#pragma once

#include "kernels/image_refs.h"

namespace llmt::kernels::cpu {

// out (B, H, W, C) fp32 = lut[byte] of each ref's augmented image (lut: 256 floats).
void gather_images(float* out, const ImageTable& table, const ImageRef* refs, int B, const float* lut);

}  // namespace llmt::kernels::cpu
