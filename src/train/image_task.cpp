// train/image_task.h.
#include "train/image_task.h"

#include <fmt/format.h>

#include <cstdio>

#include "core/check.h"
#include "core/time.h"
#include "models/classifier.h"
#include "train/classifier_eval.h"
#include "train/dist_context.h"
#include "train/image_batches.h"

namespace llmt::train {

namespace {

models::Classifier& classifier_of(models::Model& model) {
    models::Classifier* c = model.image_classifier();
    LLMT_INTERNAL_CHECK(c != nullptr, "image classification: model.arch {} is not an image classifier", model.arch());
    return *c;
}

class ImageClassificationTask final : public Task {
public:
    explicit ImageClassificationTask(const config::Config& cfg) : cfg_(cfg) {}

    // A row is one image: its H*W*C pixels (or a reference row of that width: kernels/image_refs.h).
    int row_width() const override {
        const config::ModelConfig::Classifier& c = cfg_.model.classifier;
        return c.image_size * c.image_size * c.in_channels;
    }
    CountUnit unit() const override { return {"images", "image", "img/s", row_width()}; }
    BestMetric best_metric() const override { return BestMetric("val_accuracy", /*higher_is_better=*/true); }

    std::unique_ptr<TrainBatches> open_training_data(models::Model& model, DistContext& dc, int B) override {
        images_ = load_image_data(cfg_, /*need_train=*/true);
        bind_image_data(classifier_of(model), images_);
        return open_image_training_batches(cfg_, images_, B, dc.rank(), dc.world());
    }
    std::optional<int64_t> steps_for_epochs(int world) const override {
        return train::steps_for_epochs(cfg_, images_, world);
    }

    bool evaluates() const override { return !images_.split.val.empty(); }

    Evaluation evaluate(models::Model& model, DistContext& dc, int B, int64_t) override {
        const ClassEval ev = classify(model, dc, *images_.train, kTrainSlot, images_.split.val, B);
        return {ev.loss(), ev.accuracy(),
                {{"val_loss", ev.loss()}, {"val_accuracy", ev.accuracy()}, {"val_images", ev.images}},
                fmt::format("val loss {:.4f}, accuracy {:.2f}%", ev.loss(), 100 * ev.accuracy())};
    }

    // The test set's accuracy, loss, per-class accuracy and confusion matrix into the summary, the table
    // on the log, and the test metrics where the other metrics go (metrics.jsonl, TensorBoard, MLflow).
    FinalReport final_report(models::Model& model, DistContext& dc, int B) override {
        Stopwatch sw;
        const ClassEval ev = classify(model, dc, *images_.test, kTestSlot, all_indices(images_.test->n), B);
        const double eval_s = sw.seconds();
        const auto names = class_names(cfg_);
        FinalReport r;
        r.log = fmt::format("test: {} images, accuracy {:.2f}%, loss {:.4f}\n{}", ev.images, 100 * ev.accuracy(),
                            ev.loss(), ev.table(names));
        r.summary = ev.to_json(names, "test");
        r.summary["test_images_per_sec"] = static_cast<double>(ev.images) / eval_s;  // inference, all ranks
        r.metrics = {{"test_accuracy", ev.accuracy()}, {"test_loss", ev.loss()}, {"test_images", ev.images}};
        return r;
    }

    std::optional<std::string> write_checkpoint_files(const std::filesystem::path&) override { return std::nullopt; }

    // The test set, as at the end of training (the table on stderr).
    nlohmann::ordered_json evaluate_weights(models::Model& model, const std::string& source) override {
        images_ = load_image_data(cfg_, /*need_train=*/false);
        bind_image_data(classifier_of(model), images_);
        const ClassEval ev = evaluate_images(classifier_of(model), *images_.test, kTestSlot,
                                             all_indices(images_.test->n), cfg_.trainer.micro_batch_size, 0, 1);
        const auto names = class_names(cfg_);
        fmt::print(stderr, "{}", ev.table(names));
        nlohmann::ordered_json out = ev.to_json(names, "test");
        out["weights"] = source;
        return out;
    }

private:
    // `indices` of `set` (bound at `slot`) over all ranks: each rank classifies its share, the sums are added.
    static ClassEval classify(models::Model& model, DistContext& dc, const data::ImageSet& set, int slot,
                              const std::vector<int64_t>& indices, int B) {
        ClassEval e = evaluate_images(classifier_of(model), set, slot, indices, B, dc.rank(), dc.world());
        sum_over_ranks(e, [&dc](std::vector<double>& v) { dc.sum(v); });
        return e;
    }

    config::Config cfg_;
    ImageData images_;
};

}  // namespace

std::unique_ptr<Task> make_image_task(const config::Config& cfg) {
    return std::make_unique<ImageClassificationTask>(cfg);
}

}  // namespace llmt::train
