// Building models from a config: model.arch -> the family's ArchSpec (models/arch.h; torchtitan's train
// spec, reduced to what we need). Every command that needs a model (train, eval, generate, export, the
// server's estimator) goes through here, never naming an architecture.
#pragma once

#include <memory>

#include "config/config.h"
#include "models/model.h"

namespace llmt::models {

// The model of cfg.model (with trainer.recompute) on `device` in compute `dtype`, parameters allocated
// (zeros: call init_random or load weights). InputError naming the key for sizes the arch refuses.
// shard (ZeRO-3): this rank's chunks of the parameters only (ParamStore::shard_groups); InternalError for
// an architecture without units (Model::shard_units).
std::unique_ptr<Model> make_model(const config::Config& cfg, Device device = Device::kCpu,
                                  DType dtype = DType::kF32, ParamShard shard = {});
// Its memory plan for (B, T) without allocating anything (a model too large is refused with figures).
MemoryPlan plan_model_memory(const config::Config& cfg, Device device, DType dtype, int B, int T);
// Training FLOPs per token at context T (Model::flops_per_token) without building the model.
double model_flops_per_token(const config::ModelConfig& m, int T);
// lora.* as the model layer takes it; no target_modules means PEFT's default for the family.
LoraSpec lora_spec(const config::Config& cfg);

}  // namespace llmt::models
