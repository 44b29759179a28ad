// Incremental GPT-2 inference with a KV cache (one sequence): prefill(prompt) then step(id) per new
// token, each returning the next-token logits, equal to Gpt2::forward's logits at that position.
// The cache holds each layer's qkv rows (1, max_T, 3C), the layout kernels::attention_forward_cached
// reads; the Q third is scratch (1.5x the bare K/V size) so that the same c_attn matmul and attention
// kernel serve prefill and decode. Positions past max_T (<= block_size) are an InputError: the caller
// decides how to shorten the context (llmtrain generate re-primes with the newest half).
#pragma once

#include <cstdint>
#include <span>

#include "core/arena.h"
#include "models/gpt2.h"
#include "models/model.h"

namespace llmt::models {

// Holds a reference to `model`, whose parameters must outlive the decoder and not change while a
// sequence is being decoded. Not thread-safe (the kernels use OpenMP inside).
class Gpt2Decoder final : public Decoder {
public:
    // max_T: cache capacity in positions, 0 = the model's block_size; InputError if above it.
    explicit Gpt2Decoder(const Gpt2& model, int max_T = 0);

    // Starts a new sequence: runs `ids` (1..max_T ids in [0, V)) in one batched pass and returns the
    // logits (Vp floats; columns >= V are padding) that predict the token after the last one.
    const float* prefill(std::span<const int32_t> ids) override;
    // Appends one id to the sequence and returns the logits predicting the next token. InputError
    // when the cache is full (position() == capacity(); the message names model.block_size) or
    // before any prefill.
    const float* step(int32_t id) override;

    int position() const override { return pos_; }  // ids in the cache
    int capacity() const override { return max_T_; }
    const Gpt2& model() const { return model_; }

private:
    // Runs ids at positions pos_..pos_+n-1 through the model, appending to the cache; returns the
    // logits of the last of them.
    const float* run(const int32_t* ids, int n);

    const Gpt2& model_;
    int max_T_ = 0;
    int pos_ = 0;
    bool started_ = false;
    Arena cache_;    // "h<l>.qkv": (1, max_T, 3C) per layer
    Arena scratch_;  // activations of up to max_T new positions (the prefill's width)
};

}  // namespace llmt::models
