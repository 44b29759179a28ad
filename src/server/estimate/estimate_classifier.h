// Estimates of an image classifier's run (model.arch mlp | cnn) from measured images/s rows
// (configs/throughput.jsonl rows with "images_per_s"): the same rows, card, thread and world-size
// interpolation as the language models' (server/estimate/throughput.h), spoken in images and epochs — images/s,
// seconds per epoch, the whole run of trainer.epochs (or trainer.max_steps) — instead of tokens.
// estimate_job / estimate_scaling (estimate.h) call these for a classifier config. docs/server.md
// "Estimates".
#pragma once

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "server/estimate/estimate.h"

namespace llmt::server {

// {"source", "workload": "image_classifier", "device", "model" (the shape), "flops_per_image",
//  "images_per_epoch", "epochs", "images", "images_basis", "world_size", "cost_basis", and when measured
//  "images_per_s", "seconds_per_epoch", "efficiency", "duration_s", "device_hours", "cost_usd", "card",
//  "basis", "rows_used"}; unmeasured: "reason" and null duration_s / device_hours / cost_usd. A shape
// with no row of its own is estimated from the achieved FLOP/s of the measured shapes of its arch, and
// "basis.rate" says so.
nlohmann::json estimate_classifier_job(const JobSpec& spec, const config::Config& cfg, const Rates& rates,
                                       const ThroughputTable& table);

// The same epochs (or images) at world sizes 1..max_world, each rank keeping the job's micro-batch.
nlohmann::json estimate_classifier_scaling(const JobSpec& spec, const config::Config& cfg, const Rates& rates,
                                           const ThroughputTable& table, int max_world);

// "cnn 28x28x1 c32,64 h128 k10" / "mlp 28x28x1 h256,128 k10": the shape a row's "model" names.
std::string classifier_shape(const config::ModelConfig& m);

}  // namespace llmt::server
