// kernels::gather_images (the classifier's input from a byte table and image reference rows) against the
// pixel path it replaces: data::apply_augment on the bytes, then the same lookup table. Exact equality: both
// read a table entry per byte, no arithmetic differs. Random images and draws (crop offsets within the
// padding, flips, blank rows); the CUDA kernel is checked against this CPU op in cuda_conv_test.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "data/images/image_set.h"
#include "kernels/ops.h"

namespace llmt {
namespace {

TEST(ImageGather, MatchesTheAugmentedPixelPath) {
    for (const int C : {1, 3}) {
        const int H = 7, W = 9, n = 5, B = 11;
        const int64_t per = int64_t{H} * W * C;
        std::mt19937 rng(20261127 + C);
        std::vector<uint8_t> pixels(static_cast<size_t>(n * per));
        for (auto& p : pixels) p = static_cast<uint8_t>(rng() & 255);
        std::vector<float> lut(256);
        for (int i = 0; i < 256; ++i) lut[static_cast<size_t>(i)] = static_cast<float>(i) / 255.f * 3.25f - 0.7f;
        std::vector<kernels::ImageRef> refs(B);
        std::vector<float> want(static_cast<size_t>(B * per));
        std::vector<uint8_t> aug(static_cast<size_t>(per));
        for (int b = 0; b < B; ++b) {
            data::AugmentDraw d;
            d.dy = static_cast<int>(rng() % 5) - 2;
            d.dx = static_cast<int>(rng() % 5) - 2;
            d.flip = rng() & 1;
            const int index = b == B - 1 ? -1 : static_cast<int>(rng() % n);  // the last row blank
            refs[static_cast<size_t>(b)] = {index, d.dy, d.dx, d.flip ? 1 : 0};
            if (index >= 0) data::apply_augment(aug.data(), pixels.data() + index * per, H, W, C, d);
            else std::fill(aug.begin(), aug.end(), 0);
            for (int64_t i = 0; i < per; ++i)
                want[static_cast<size_t>(b * per + i)] = lut[aug[static_cast<size_t>(i)]];
        }
        std::vector<float> got(want.size(), -99.f);
        kernels::gather_images(Tensor(got.data(), {B, H, W, C}), kernels::ImageTable{pixels.data(), n, H, W, C},
                               Tensor(refs.data(), {B, 4}, DType::kI32), lut.data());
        EXPECT_EQ(got, want) << "C = " << C;
    }
}

}  // namespace
}  // namespace llmt
