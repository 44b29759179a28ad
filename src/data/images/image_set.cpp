#include "data/images/image_set.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/rng.h"
#include "data/images/idx.h"

namespace llmt::data {

namespace {

// Fisher-Yates by a counter-based stream: the same permutation on every machine and thread count.
void shuffle_by(std::vector<int64_t>& v, uint64_t seed, uint64_t stream) {
    const CounterRng rng(seed, stream);
    for (size_t i = v.size(); i > 1; --i) {
        const size_t j = static_cast<size_t>(rng.bits(i) % i);
        std::swap(v[i - 1], v[j]);
    }
}

}  // namespace

ImageSet load_image_set(const std::filesystem::path& images, const std::filesystem::path& labels, int num_classes) {
    IdxArray im = read_idx(images, 3);
    IdxArray lb = read_idx(labels, 1);
    if (im.items() != lb.items())
        throw FormatError(fmt::format("'{}' holds {} images but '{}' holds {} labels", images.string(), im.items(),
                                      labels.string(), lb.items()));
    for (int64_t i = 0; i < lb.items(); ++i)
        if (lb.data[static_cast<size_t>(i)] >= num_classes)
            throw FormatError(fmt::format("'{}': label {} at offset {} is not below model.num_classes ({})",
                                          labels.string(), lb.data[static_cast<size_t>(i)], 8 + i, num_classes));
    ImageSet s;
    s.n = im.items();
    s.H = static_cast<int>(im.dims[1]);
    s.W = static_cast<int>(im.dims[2]);
    s.C = 1;
    s.pixels = std::move(im.data);
    s.labels = std::move(lb.data);
    return s;
}

EpochSampler::EpochSampler(std::vector<int64_t> indices, uint64_t seed, bool shuffle, int rank, int world, int B)
    : indices_(std::move(indices)), seed_(seed), shuffle_(shuffle), rank_(rank), world_(world), B_(B) {
    const int64_t n = static_cast<int64_t>(indices_.size());
    per_rank_ = (n + world - 1) / world;
}

int EpochSampler::rows(int64_t b) const { return static_cast<int>(std::min<int64_t>(B_, per_rank_ - b * B_)); }

std::vector<int64_t> EpochSampler::order(int64_t epoch) const {
    std::vector<int64_t> all = indices_;
    if (shuffle_) shuffle_by(all, seed_ ^ 0x696d616765ull, static_cast<uint64_t>(epoch));  // "image"
    const size_t total = static_cast<size_t>(per_rank_) * static_cast<size_t>(world_);
    for (size_t i = 0; all.size() < total; ++i) all.push_back(all[i]);  // pad: repeat the first entries
    std::vector<int64_t> mine;
    mine.reserve(static_cast<size_t>(per_rank_));
    for (size_t i = static_cast<size_t>(rank_); i < total; i += static_cast<size_t>(world_)) mine.push_back(all[i]);
    return mine;
}

std::vector<int64_t> EpochSampler::batch(int64_t epoch, int64_t b) const {
    if (epoch != cached_epoch_) {
        cached_ = order(epoch);
        cached_epoch_ = epoch;
    }
    const auto first = cached_.begin() + b * B_;
    return std::vector<int64_t>(first, first + rows(b));
}

AugmentDraw draw_augment(const Augment& a, uint64_t seed, int64_t epoch, int64_t index) {
    const CounterRng rng(seed ^ 0x61756700ull, static_cast<uint64_t>(epoch));  // "aug"
    const uint64_t r = rng.bits(static_cast<uint64_t>(index));
    const int p = a.crop_padding;
    // The crop's top-left corner in the padded image, in [0, 2p]; the flip from another 8 bits.
    AugmentDraw d;
    d.dy = p > 0 ? static_cast<int>(r % static_cast<uint64_t>(2 * p + 1)) - p : 0;
    d.dx = p > 0 ? static_cast<int>((r >> 16) % static_cast<uint64_t>(2 * p + 1)) - p : 0;
    d.flip = a.hflip && ((r >> 40) & 1);
    return d;
}

void apply_augment(uint8_t* out, const uint8_t* in, int H, int W, int C, const AugmentDraw& d) {
    // Pixel (y, x) of the crop is (y + dy, x + dx) of the original (0 outside it); the flip mirrors the crop.
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
            const int sy = y + d.dy, sx = x + d.dx;
            const bool inside = sy >= 0 && sy < H && sx >= 0 && sx < W;
            uint8_t* dst = out + (static_cast<size_t>(y) * W + (d.flip ? W - 1 - x : x)) * C;
            for (int c = 0; c < C; ++c) dst[c] = inside ? in[(static_cast<size_t>(sy) * W + sx) * C + c] : 0;
        }
}

void augment_image(uint8_t* out, const uint8_t* in, int H, int W, int C, const Augment& a, uint64_t seed,
                   int64_t epoch, int64_t index) {
    apply_augment(out, in, H, W, C, draw_augment(a, seed, epoch, index));
}

Split split_indices(int64_t n, double val_fraction, uint64_t seed) {
    std::vector<int64_t> all(static_cast<size_t>(n));
    std::iota(all.begin(), all.end(), 0);
    const int64_t n_val = static_cast<int64_t>(std::llround(static_cast<double>(n) * val_fraction));
    shuffle_by(all, seed ^ 0x73706c6974ull, 0);  // "split"
    Split s;
    s.train.assign(all.begin(), all.end() - n_val);
    s.val.assign(all.end() - n_val, all.end());
    std::sort(s.train.begin(), s.train.end());
    std::sort(s.val.begin(), s.val.end());
    return s;
}

}  // namespace llmt::data
