// Language modelling, the task of every model.arch but the image classifiers (train/task.h): batches of
// token windows from shards or chat rows with per-example positions (train/batches.h), the validation
// loss as the best metric (lower is better), throughput in tokens, and checkpoints that load in
// transformers (config.json, generation_config.json and the run's tokenizer beside the weights:
// train/hf_model_files.h).
#pragma once

#include <memory>

#include "train/task.h"

namespace llmt::train {

std::unique_ptr<Task> make_lm_task(const config::Config& cfg);

}  // namespace llmt::train
