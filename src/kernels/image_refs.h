// The arguments of kernels/ops.h gather_images shared by its CPU and CUDA backends: a batch of images named by
// index into a byte table (data/image_set.h's image reference rows, resolved to one table), each with its
// augmentation draw, normalised through a 256-entry lookup table.
#pragma once

#include <cstdint>

namespace llmt::kernels {

// One image of the batch: its index in the table (-1: a blank row, every pixel 0) and its crop/flip draw
// (data::AugmentDraw: out(y, x) = image(y + dy, xs + dx), xs = flip ? W - 1 - x : x, 0 outside).
struct ImageRef {
    int32_t index, dy, dx, flip;
};

struct ImageTable {
    const uint8_t* pixels;  // images x H x W x C bytes, on the gather's device
    int64_t images;
    int H, W, C;
};

}  // namespace llmt::kernels
