// What a language model has beyond every model (models/model.h): a KV-cache decoder (`generate`, `chat`)
// and the canonical Hugging Face names of the tensors it finds in a file. GPT-2 and the families on the
// LLaMA graph are language models; the image classifiers are not. Not thread-safe (as Model).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "models/model.h"

namespace llmt::models {

class Decoder;

class LanguageModel : public Model {
public:
    const LanguageModel* language_model() const override { return this; }

    // A KV-cache decoder over this model's parameters (which must outlive it and not change meanwhile).
    // max_T: cache capacity, 0 = block_size.
    virtual std::unique_ptr<Decoder> decoder(int max_T = 0) const = 0;

    // Hugging Face: the canonical name of a tensor found in an HF file (hub spellings normalised), or ""
    // for a tensor to ignore (buffers such as GPT-2's attention masks). config.json comes from the config
    // (models/hf_config.h), not the model.
    virtual std::string hf_canonical_name(const std::string& name) const = 0;

protected:
    LanguageModel() = default;
};

// `model` as a language model; InputError naming model.arch for one that is not (an image classifier has
// no text decoder: llmtrain predict classifies images).
const LanguageModel& as_language_model(const Model& model);

// Incremental inference with a KV cache (one sequence): prefill(prompt) then step(id) per new token,
// each returning the next-token logits (Vp floats; columns >= V are padding), equal to the model's forward
// logits at that position. CPU models. The bookkeeping is here; the decoder of every language model
// (models/kv_decoder.h) runs the model's op sequence on the new positions.
class Decoder {
public:
    virtual ~Decoder() = default;
    // Starts a new sequence: 1..capacity() ids in [0, V), in one batched pass.
    const float* prefill(std::span<const int32_t> ids);
    // Appends one id; InputError when the cache is full (naming model.block_size), InternalError before
    // any prefill.
    const float* step(int32_t id);
    int position() const { return pos_; }  // ids in the cache
    int capacity() const { return max_T_; }

protected:
    // max_T: cache capacity in positions, 0 = the model's block_size (InternalError above it or for a model
    // not on the CPU).
    Decoder(const Model& model, int max_T);
    // Runs `n` ids (validated) at positions position()..position()+n-1, appending to the cache; returns the
    // logits of the last of them.
    virtual const float* run(const int32_t* ids, int n) = 0;

private:
    ModelDims dims_;
    int max_T_ = 0;
    int pos_ = 0;
    bool started_ = false;
};

}  // namespace llmt::models
