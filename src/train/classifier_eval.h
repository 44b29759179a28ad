// Evaluation of an image classifier (model.arch mlp | cnn): loss, accuracy, per-class accuracy and the
// confusion matrix over a set of images, each rank taking a contiguous share and the sums added over
// ranks. The trainer runs it on the validation split (every trainer.eval_every_steps; the best
// checkpoint is kept by validation accuracy) and on the test set at the end of every run; `llmtrain eval`
// runs it on the test set.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/images/image_set.h"

namespace llmt::models {
class Classifier;
}

namespace llmt::train {

struct ClassEval {
    int classes = 0;
    int64_t images = 0;
    double loss_sum = 0;              // summed cross-entropy
    std::vector<int64_t> confusion;  // classes x classes: row = true class, column = predicted

    int64_t correct() const;
    double accuracy() const;  // fraction 0..1
    double loss() const;      // mean cross-entropy
    std::vector<double> per_class_accuracy() const;  // recall of each true class (0 for a class without images)
    // test_accuracy, test_loss, per_class_accuracy, confusion_matrix, class_names, test_images (prefix "test").
    nlohmann::ordered_json to_json(const std::vector<std::string>& names, const std::string& prefix) const;
    // The table printed at the end of a run: per class its images and accuracy, then the confusion matrix.
    std::string table(const std::vector<std::string>& names) const;
};

// This rank's share of `indices` of `set`, in batches of B (the model's forward without training). `set`
// must be bound to the model at `slot` (Classifier::bind_images; train/image_batches.h bind_image_data).
ClassEval evaluate_images(models::Classifier& model, const data::ImageSet& set, int slot,
                          const std::vector<int64_t>& indices, int B, int rank, int world);
// 0, 1, ..., n - 1: every image of a set of n, for evaluate_images.
std::vector<int64_t> all_indices(int64_t n);
// Adds every rank's sums in one reduction (`sum`: replaces each element of the vector by its sum over
// ranks; identity for one process).
void sum_over_ranks(ClassEval& e, const std::function<void(std::vector<double>&)>& sum);

}  // namespace llmt::train
