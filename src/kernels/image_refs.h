// The arguments of kernels/ops.h gather_images shared by its CPU and CUDA backends: a batch of images named by
// index into a byte table (data/images/image_set.h's image reference rows, resolved to one table), each with its
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

// A batch row that names an image of a set bound to the model instead of holding its pixels
// (train/image_batches.cpp and train/classifier_eval.cpp write them, models/classifier.h reads them), so a
// step moves a few integers per image, not its pixels: row[0] = kImageRefTag (never a pixel value), row[1]
// the set's slot, row[2] the image's index in the set (-1: a blank row, all pixels 0), row[3..5] its
// augmentation draw (dy, dx, flip: data::AugmentDraw). Rows of at least kImageRefInts values only.
constexpr int32_t kImageRefTag = -2;
constexpr int kImageRefInts = 6;
inline void write_image_ref(int32_t* row, int slot, int64_t index, int dy = 0, int dx = 0, bool flip = false) {
    row[0] = kImageRefTag;
    row[1] = slot;
    row[2] = static_cast<int32_t>(index);
    row[3] = dy;
    row[4] = dx;
    row[5] = flip ? 1 : 0;
}

}  // namespace llmt::kernels
