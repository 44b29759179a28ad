#include "train/image_batches.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "kernels/image_refs.h"
#include "models/classifier.h"

namespace llmt::train {

namespace {

// Row r of x names image `index` of the set bound to the model at `slot` with its augmentation draw (a
// reference row, kernels/image_refs.h: the model gathers the pixels itself); y's row holds the label in its first
// slot, the only one a classifier reads. index -1: a blank, unlabelled row.
void write_ref_row(int32_t* x, int32_t* y, int T, int r, int slot, int64_t index, int label,
                   const data::AugmentDraw& draw) {
    kernels::write_image_ref(x + static_cast<int64_t>(r) * T, slot, index, draw.dy, draw.dx, draw.flip);
    y[static_cast<int64_t>(r) * T] = label;
}

// Rows [from, B) of a short batch: blank and unlabelled.
void blank_rows(int32_t* x, int32_t* y, int T, int slot, int from, int B) {
    for (int r = from; r < B; ++r) write_ref_row(x, y, T, r, slot, -1, -1, {});
}

class ImageTrainBatches final : public TrainBatches {
public:
    ImageTrainBatches(std::shared_ptr<const data::ImageSet> set, std::vector<int64_t> indices,
                      const config::Config& cfg, int B, int rank, int world)
        : set_(std::move(set)),
          n_(static_cast<int64_t>(indices.size())),
          sampler_(std::move(indices), cfg.run.seed, cfg.data.shuffle, rank, world, B),
          seed_(cfg.run.seed),
          B_(B),
          T_(static_cast<int>(set_->image_size())),
          world_(world) {
        aug_.crop_padding = cfg.data.crop_padding;
        aug_.hflip = cfg.data.hflip;
    }

    MicroBatch next(int32_t* x, int32_t* y, int32_t* /*pos*/) override {
        const std::vector<int64_t> rows = sampler_.batch(epoch_, batch_);
        for (size_t r = 0; r < rows.size(); ++r) {
            const data::AugmentDraw draw =
                aug_.active() ? data::draw_augment(aug_, seed_, epoch_, rows[r]) : data::AugmentDraw{};
            write_ref_row(x, y, T_, static_cast<int>(r), kTrainSlot, rows[r],
                          set_->labels[static_cast<size_t>(rows[r])], draw);
        }
        blank_rows(x, y, T_, kTrainSlot, static_cast<int>(rows.size()), B_);
        advance(epoch_, batch_);
        return {T_, static_cast<int64_t>(rows.size()), false};
    }

    int64_t global_targets_ahead(int k) const override {
        int64_t e = epoch_, b = batch_, total = 0;
        bool uniform = true;
        for (int i = 0; i < k; ++i) {
            const int rows = sampler_.rows(b);
            uniform = uniform && rows == B_;
            total += static_cast<int64_t>(rows) * world_;  // every rank has the same rows per batch
            advance(e, b);
        }
        return uniform ? 0 : total;
    }

    nlohmann::json state() const override {
        return {{"kind", "idx"}, {"epoch", epoch_}, {"batch", batch_}, {"images", n_}, {"world", world_}, {"B", B_}};
    }

    void restore(const nlohmann::json& s) override {
        if (!s.is_object() || s.value("kind", "") != "idx")
            throw InputError("expected the position of an idx image loader (kind \"idx\")");
        for (const auto& [key, want] : {std::pair<const char*, int64_t>{"images", n_}, {"world", world_}, {"B", B_}})
            if (s.value(key, int64_t{-1}) != want)
                throw InputError(fmt::format("\"{}\" is {} in the checkpoint but {} in this run (the training split, "
                                             "world size and micro-batch must match to resume exactly)",
                                             key, s.value(key, int64_t{-1}), want));
        epoch_ = s.at("epoch").get<int64_t>();
        batch_ = s.at("batch").get<int64_t>();
        if (epoch_ < 0 || batch_ < 0 || batch_ >= sampler_.batches_per_epoch())
            throw InputError(fmt::format("\"batch\" {} is outside the epoch's {} batches", batch_,
                                         sampler_.batches_per_epoch()));
    }

    std::size_t num_rows() const override { return static_cast<std::size_t>(n_); }
    std::string describe() const override {
        return fmt::format("idx: {} training images of {}x{}x{}, {} per rank per epoch in {} batches of {}{}{}", n_,
                           set_->H, set_->W, set_->C, sampler_.per_rank(), sampler_.batches_per_epoch(), B_,
                           aug_.crop_padding > 0 ? fmt::format(", random crop (padding {})", aug_.crop_padding) : "",
                           aug_.hflip ? ", horizontal flips" : "");
    }

private:
    void advance(int64_t& e, int64_t& b) const {
        if (++b == sampler_.batches_per_epoch()) {
            b = 0;
            ++e;
        }
    }

    std::shared_ptr<const data::ImageSet> set_;
    int64_t n_;
    data::EpochSampler sampler_;
    data::Augment aug_;
    uint64_t seed_;
    int B_, T_, world_;
    int64_t epoch_ = 0, batch_ = 0;
};

void check_fits_model(const data::ImageSet& s, const config::Config& cfg, const std::string& file) {
    const config::ModelConfig::Classifier& m = cfg.model.classifier;
    if (s.H != m.image_size || s.W != m.image_size || s.C != m.in_channels)
        throw InputError(fmt::format("'{}' holds {}x{} images with {} channel(s); the model expects {}x{} with {} "
                                     "(model.image_size, model.in_channels)",
                                     file, s.H, s.W, s.C, m.image_size, m.image_size, m.in_channels));
}

std::shared_ptr<const data::ImageSet> load_checked(const config::Config& cfg, const std::string& images,
                                                   const std::string& labels) {
    auto s = std::make_shared<data::ImageSet>(data::load_image_set(images, labels, cfg.model.classifier.num_classes));
    check_fits_model(*s, cfg, images);
    if (s->image_size() < kernels::kImageRefInts)
        throw InputError(
            fmt::format("'{}' holds images of {} values; image classification needs at least {} per image", images,
                        s->image_size(), kernels::kImageRefInts));
    return s;
}

}  // namespace

ImageData load_image_data(const config::Config& cfg, bool need_train) {
    ImageData d;
    if (need_train) {
        d.train = load_checked(cfg, cfg.data.train_images, cfg.data.train_labels);
        d.split = data::split_indices(d.train->n, cfg.data.val_fraction, cfg.run.seed);
        if (d.split.train.empty())
            throw InputError(fmt::format("data.val_fraction {} leaves no training images of {}", cfg.data.val_fraction,
                                         d.train->n));
    }
    d.test = load_checked(cfg, cfg.data.test_images, cfg.data.test_labels);
    return d;
}

void bind_image_data(models::Classifier& model, const ImageData& data) {
    auto source = [](const std::shared_ptr<const data::ImageSet>& s) {
        return models::ImageSource{s, s->pixels.data(), s->n, s->H, s->W, s->C};
    };
    if (data.train) model.bind_images(kTrainSlot, source(data.train));
    if (data.test) model.bind_images(kTestSlot, source(data.test));
}

std::unique_ptr<TrainBatches> open_image_training_batches(const config::Config& cfg, const ImageData& data, int B,
                                                          int rank, int world) {
    return std::make_unique<ImageTrainBatches>(data.train, data.split.train, cfg, B, rank, world);
}

int64_t steps_for_epochs(const config::Config& cfg, const ImageData& data, int world) {
    const int64_t n = static_cast<int64_t>(data.split.train.size());
    const int64_t B = cfg.trainer.micro_batch_size, accum = cfg.trainer.grad_accum_steps;
    const int64_t per_rank = (n + world - 1) / world;
    const int64_t micro_per_epoch = (per_rank + B - 1) / B;
    return (cfg.trainer.epochs * micro_per_epoch + accum - 1) / accum;
}

std::vector<std::string> class_names(const config::Config& cfg) {
    std::string path = cfg.data.test_images;
    std::transform(path.begin(), path.end(), path.begin(), [](unsigned char c) { return std::tolower(c); });
    if (cfg.model.classifier.num_classes == 10 && path.find("fashion") != std::string::npos)
        return {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
    std::vector<std::string> names;
    for (int c = 0; c < cfg.model.classifier.num_classes; ++c) names.push_back(std::to_string(c));
    return names;
}

}  // namespace llmt::train
