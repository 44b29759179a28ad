// Image classification, the task of the image classifiers (model.arch mlp | cnn; train/task.h): the
// training and test sets of data.source idx bound to the model (train/image_batches.h), validation
// accuracy as the best metric (higher is better) with loss, per-class accuracy and the confusion matrix
// (train/classifier_eval.h), the test set at the end of every run, and throughput in images. A
// classifier's checkpoint holds its weights only (transformers has no counterpart to load it).
#pragma once

#include <memory>

#include "train/task.h"

namespace llmt::train {

std::unique_ptr<Task> make_image_task(const config::Config& cfg);

}  // namespace llmt::train
