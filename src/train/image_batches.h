// data.source idx behind the trainer's batch interface (train/batches.h): a row is one image, its T =
// H*W*C pixel bytes as int32, and its label in the row's first target slot (the rest -1); models/
// classifier.h reads that layout. Training rows come from the training split in DistributedSampler's
// order (data/images/image_set.h) with the configured augmentation; the last batch of an epoch is partial, its
// missing rows unlabelled (they weigh nothing in the loss). Validation and test images are classified
// from their sets directly (train/classifier_eval.h), not through batches.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/images/image_set.h"
#include "train/batches.h"

namespace llmt::models {
class Classifier;
}

namespace llmt::train {

// Batch rows name their images (kernels/image_refs.h reference rows) in the sets bound to the model at these
// slots (bind_image_data): the training file's (training and validation rows) and the test file's.
constexpr int kTrainSlot = 0;
constexpr int kTestSlot = 1;

// The image files of a config, loaded and checked against the model (image size, channels, classes).
struct ImageData {
    std::shared_ptr<const data::ImageSet> train;  // the training file (training and validation splits)
    data::Split split;                              // by data.val_fraction and run.seed
    std::shared_ptr<const data::ImageSet> test;
};
// `need_train`: false for eval and predict, which read the test file only (train stays null).
ImageData load_image_data(const config::Config& cfg, bool need_train);

// Binds the loaded sets to `model` at kTrainSlot and kTestSlot (the one a null set leaves out).
void bind_image_data(models::Classifier& model, const ImageData& data);

// The training split's batches of B rows for rank/world.
std::unique_ptr<TrainBatches> open_image_training_batches(const config::Config& cfg, const ImageData& data, int B,
                                                          int rank, int world);

// Optimizer steps of `epochs` passes: ceil(ceil(train / world) / B) micro-batches per epoch, grouped
// by grad_accum_steps (a step may span an epoch boundary).
int64_t steps_for_epochs(const config::Config& cfg, const ImageData& data, int world);

// Names of the classes for tables and summary.json: Fashion-MNIST's ten for that set (recognised by its
// file name), else the label numbers.
std::vector<std::string> class_names(const config::Config& cfg);

}  // namespace llmt::train
