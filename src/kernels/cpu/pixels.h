// Image bytes to a classifier's fp32 inputs through a 256-entry table (models/classifier.h fills it with
// (p/255 - mean) / std): one lookup per pixel, the same values on every backend (the table is computed
// once on the host), no arithmetic in the hot loop.
#pragma once

#include <cstddef>
#include <cstdint>

namespace llmt::kernels::cpu {

// out[i] = table[pixels[i] & 255] for i < n. Callers validate that pixels are 0..255 (the mask only keeps a
// bad value from reading outside the table).
void normalize_pixels(float* out, const int32_t* pixels, size_t n, const float* table);

}  // namespace llmt::kernels::cpu
