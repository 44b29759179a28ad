// MNIST-format image sets (data.source: idx): images and labels from a pair of IDX files, the order a
// rank reads them in (DistributedSampler's semantics), and the training augmentation. Pixels stay bytes
// (0..255) here; the model normalises them (models/classifier.h), so predict and eval see the same input.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace llmt::data {

struct ImageSet {
    int64_t n = 0;                // images
    int H = 0, W = 0, C = 1;      // each image (B,H,W,C): channels last
    std::vector<uint8_t> pixels;  // n * H * W * C
    std::vector<uint8_t> labels;  // n
    int64_t image_size() const { return static_cast<int64_t>(H) * W * C; }
    const uint8_t* image(int64_t i) const { return pixels.data() + i * image_size(); }
};

// Reads images (IDX rank 3: n x H x W) and labels (IDX rank 1: n). FormatError naming the files when the
// counts differ or a label is >= num_classes.
ImageSet load_image_set(const std::filesystem::path& images, const std::filesystem::path& labels, int num_classes);

// torch.utils.data.DistributedSampler over `indices`: each epoch a permutation by (seed, epoch) when
// shuffling, padded to a multiple of `world` by repeating its first entries, rank r taking entries r,
// r + world, ...; every rank gets ceil(n / world) of them. Then batches of B in that order, the last one
// partial (drop_last false).
class EpochSampler {
public:
    EpochSampler(std::vector<int64_t> indices, uint64_t seed, bool shuffle, int rank, int world, int B);
    int64_t per_rank() const { return per_rank_; }
    int64_t batches_per_epoch() const { return (per_rank_ + B_ - 1) / B_; }
    // Rows of batch `b` of an epoch (B, or fewer for the last).
    int rows(int64_t b) const;
    // The dataset indices of batch `b` of `epoch` for this rank.
    std::vector<int64_t> batch(int64_t epoch, int64_t b) const;

private:
    std::vector<int64_t> order(int64_t epoch) const;
    std::vector<int64_t> indices_;
    uint64_t seed_;
    bool shuffle_;
    int rank_, world_, B_;
    int64_t per_rank_;
    mutable int64_t cached_epoch_ = -1;
    mutable std::vector<int64_t> cached_;  // this rank's order for cached_epoch_
};

// Training augmentation (torchvision's RandomCrop(padding) then RandomHorizontalFlip, both on the
// bytes: padding pixels are 0): drawn from (seed, epoch, index), so resume and every rank layout see
// the same images.
struct Augment {
    int crop_padding = 0;  // 0 = off
    bool hflip = false;
    bool active() const { return crop_padding > 0 || hflip; }
};
// One image's draw of it: the crop's offset (dy, dx) in [-p, p] and the flip.
struct AugmentDraw {
    int dy = 0, dx = 0;
    bool flip = false;
};
AugmentDraw draw_augment(const Augment& a, uint64_t seed, int64_t epoch, int64_t index);
// out(y, x) = in(y + dy, xs + dx) with xs = flip ? W - 1 - x : x, 0 outside `in` (channels alike).
void apply_augment(uint8_t* out, const uint8_t* in, int H, int W, int C, const AugmentDraw& d);
// apply_augment(draw_augment(...)).
void augment_image(uint8_t* out, const uint8_t* in, int H, int W, int C, const Augment& a, uint64_t seed,
                   int64_t epoch, int64_t index);

// Train/validation split of n images: the last round(n * val_fraction) of a permutation by seed are
// validation, the others training (each list sorted).
struct Split {
    std::vector<int64_t> train, val;
};
Split split_indices(int64_t n, double val_fraction, uint64_t seed);

}  // namespace llmt::data
