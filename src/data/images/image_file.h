// Images to classify (`llmtrain predict`): an IDX file of images (raw or .gz), or one PGM (P5 binary or P2
// text, maxval <= 255) or PNG (8-bit grey, grey+alpha, RGB or RGBA, not interlaced; colour turned to grey
// by ITU-R BT.601 luma, alpha ignored). Each image must be H x W; FormatError naming the file otherwise.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace llmt::data {

struct GreyImages {
    int H = 0, W = 0;
    std::vector<std::vector<uint8_t>> images;  // H*W bytes each
};

GreyImages read_images_for_prediction(const std::filesystem::path& path);

}  // namespace llmt::data
