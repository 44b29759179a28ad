// Memory per GPU and communication per optimizer step of data-parallel training at each ZeRO stage, for a
// model of P parameters on N GPUs: the arithmetic behind docs/distributed.md ("Scale on paper") and
// `llmtrain estimate`'s stage table. Model state only (weights, gradients, optimizer state, and ZeRO-3's
// gathered layers); activations depend on micro-batch, context and recompute and are the memory plan's
// (train/run_plan.h). Pure functions.
#pragma once

#include <string>
#include <vector>

namespace llmt::config {
struct Config;
}

namespace llmt::train {

struct ScaleModel {
    double parameters = 0;     // trained parameters
    double largest_layer = 0;  // parameters of the largest transformer block
    double embedding = 0;      // parameters of one vocabulary table (the embeddings; the head when untied)
    bool tied = true;          // the head is the embedding table
    bool bf16 = true;          // a bf16 compute copy beside the fp32 master weights (else fp32 only)
    int moments = 2;           // fp32 optimizer values per parameter: AdamW 2, SGD with momentum 1, without 0
};

enum class ZeroStage {
    k0,             // DDP: everything whole on every GPU; gradients all-reduced
    k1,  // ZeRO-1 as llmtrain runs it: optimizer state and (under bf16) the fp32 masters sharded; the compute
         // weights and the gradients whole
    k3,  // parameters, gradients and optimizer state sharded; the embeddings, the head and two blocks gathered
         // (train/zero3_gather.h's four buffers, weights and fp32 gradients)
};
const char* zero_stage_name(ZeroStage s);  // "0", "1", "3""

struct StageCost {
    double bytes_per_gpu = 0;  // model state held by one GPU
    double comm_bytes = 0;     // bytes one GPU sends per optimizer step (ring collectives)
};
StageCost stage_cost(const ScaleModel& m, ZeroStage stage, int world);

// The model of a config for full training: parameters (the fp32 arena the memory plan lays out), one
// vocabulary table and the largest block (the rest divided by n_layer) from its shapes, bf16 when
// trainer.precision is bf16, moments from trainer.optimizer.
ScaleModel scale_model(const config::Config& cfg);

// The stage and world size a model needs on GPUs of `gpu_bytes`, leaving `reserve` of each for
// activations and workspace: the first world size of `worlds` (ascending) at which a stage fits,
// lowest stage first. Empty `stage` when none fits.
struct StageChoice {
    int world = 0;
    std::string stage;  // zero_stage_name; empty: none of the world sizes fits
    double bytes_per_gpu = 0;
};
StageChoice choose_stage(const ScaleModel& m, double gpu_bytes, double reserve, const std::vector<int>& worlds);

}  // namespace llmt::train
