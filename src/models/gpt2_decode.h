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
#include "models/language_model.h"

namespace llmt::models {

// Holds a reference to `model`, whose parameters must outlive the decoder and not change while a
// sequence is being decoded. Not thread-safe (the kernels use OpenMP inside).
class Gpt2Decoder final : public Decoder {
public:
    // max_T: cache capacity in positions, 0 = the model's block_size.
    explicit Gpt2Decoder(const Gpt2& model, int max_T = 0);
    const Gpt2& model() const { return model_; }

private:
    const float* run(const int32_t* ids, int n) override;

    const Gpt2& model_;
    Arena cache_;    // "h<l>.qkv": (1, max_T, 3C) per layer
    Arena scratch_;  // activations of up to max_T new positions (the prefill's width)
};

}  // namespace llmt::models
