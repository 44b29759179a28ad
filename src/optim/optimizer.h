// What the Trainer needs of an optimizer (trainer.optimizer: adamw | sgd): a step over the fp32 master
// arena, and its state as named tensors for optimizer.safetensors (docs/formats/checkpoint.md).
// Implementations: AdamW (adamw.h) and SGD with momentum (sgd.h). One instance per rank, not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/safetensors.h"
#include "core/tensor.h"

namespace llmt::optim {

class Optimizer {
public:
    virtual ~Optimizer() = default;

    // "adamw" or "sgd": the trainer.optimizer value this state belongs to.
    virtual const char* name() const = 0;

    // One step on params[begin, end) from grads[begin, end) (both full-arena pointers, the arena on the
    // optimizer's device): g = grads * grad_scale (the clipping coefficient), then the update with lr.
    // params_lp (optional): the model's flat bf16 compute copy, rewritten in the same pass.
    // ParamsAt::kSlice: `params` points at element begin (the fp32 masters of this slice only, a
    // ParamStore with sharded masters) instead of the arena's start. ParamsAt::kChunk: `params` and `grads`
    // both point at element begin (ZeRO-3: one group's chunk of the masters and of the gradients).
    enum class ParamsAt { kArena, kSlice, kChunk };
    virtual void step(float* params, const float* grads, float lr, float grad_scale = 1.0f, Tensor params_lp = {},
                      ParamsAt at = ParamsAt::kArena) = 0;

    // The state as named tensors and metadata (a "format" tag naming the optimizer, the arena size and the
    // slice bounds); the refs stay valid until the next step(), state_tensors() or load_state().
    virtual std::vector<TensorRef> state_tensors() const = 0;
    virtual std::map<std::string, std::string> state_metadata() const = 0;

    // Restores the state from a file written from state_tensors()/state_metadata(). Throws CheckpointError
    // naming both optimizers when the file holds another optimizer's state, and one listing every
    // difference (names, shapes, dtypes, slice) otherwise; changes nothing in either case.
    virtual void load_state(const SafetensorsFile& file) = 0;

    // Restores the state from files that each hold one slice of the same arena, sliced otherwise than
    // this optimizer (the ZeRO-1 shards of another world size, or one whole-arena file for a shard):
    // each element is read from the file whose slice holds it (optim/state_shards.h). Throws
    // CheckpointError (another optimizer, another arena size, slices that overlap or leave part of this
    // optimizer's slice uncovered, shards of different steps, a tensor missing or of the wrong size) and
    // changes nothing in that case.
    virtual void load_state_shards(const std::vector<const SafetensorsFile*>& files) = 0;

protected:
    Optimizer() = default;
    Optimizer(const Optimizer&) = default;
    Optimizer& operator=(const Optimizer&) = default;
    Optimizer(Optimizer&&) = default;
    Optimizer& operator=(Optimizer&&) = default;
};

// Throws the "another optimizer's state" CheckpointError when `file`'s "format" metadata is a known
// optimizer format other than `format` (the one of the optimizer `name` loading it). Unknown or absent
// formats pass: the caller's own metadata comparison names them.
void check_state_owner(const SafetensorsFile& file, const std::string& format, const char* name);

// Throws CheckpointError listing every difference between `file` and the optimizer's expected metadata
// and tensors (names, dtypes, shapes); `note` (may be empty) is added after the count. Reads nothing.
void check_state_matches(const SafetensorsFile& file, const std::map<std::string, std::string>& metadata,
                         const std::vector<TensorSpec>& specs, const std::string& note = "");

}  // namespace llmt::optim
