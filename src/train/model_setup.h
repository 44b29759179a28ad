// The pieces of a run's set-up shared by `llmtrain train` (train/trainer.cpp) and `llmtrain eval`
// (train/run_evaluation.cpp): the data files, the model with its weights, the optimizer's parameter slots.
#pragma once

#include <memory>
#include <vector>

#include "config/config.h"
#include "core/tensor.h"
#include "models/hf_resolve.h"
#include "models/model.h"
#include "optim/param_slots.h"
#include "train/batches.h"

namespace llmt::train {

// The train and val shard lists for the configured source (preparing text/jsonl into the cache). need_train:
// no train shard is an input error.
ShardFiles resolve_data(const config::Config& cfg, bool need_train);

// The model with its weights: drawn from run.seed, or model.init_from's; under LoRA the adapters fresh
// from run.seed or lora.init_from's (a PEFT adapter directory).
// shard (ZeRO-3): this rank's chunks of the parameters only, each tensor drawn or read whole and cut (never
// the whole model at once).
std::unique_ptr<models::Model> build_model(const config::Config& cfg, const models::HfSource& init_from, Device device,
                                           DType dtype, models::ParamShard shard = {});

// The optimizer's tensors: the trainable ones, weight decay on matrices (and embeddings when asked).
std::vector<optim::ParamSlot> param_slots(const models::Model& model, bool decay_embeddings);

}  // namespace llmt::train
