// Incremental inference with a KV cache (one sequence) for every language model (models/transformer.h),
// the Decoder of language_model.h: the same op sequence as Transformer::forward on the new positions only
// (each block's decode), with attention over the cached rows. The cache holds each layer's q|k|v rows
// (1, max_T, (NH + 2 KV) * HS), the layout kernels::attention_forward_cached reads: K and V with the
// model's n_kv_head heads (grouped-query: not repeated per query head), rotated with RoPE; the Q slots are
// scratch for the rows being computed, so one projection and one attention kernel serve prefill and decode.
// Positions past max_T (<= block_size) are an InputError: the caller decides how to shorten the context
// (llmtrain generate re-primes with the newest half).
#pragma once

#include <cstdint>

#include "core/arena.h"
#include "models/block_config.h"
#include "models/language_model.h"

namespace llmt::models {

class Transformer;

// Holds a reference to `model`, whose parameters must outlive the decoder and not change while a sequence
// is being decoded. Not thread-safe (the kernels use OpenMP inside).
class KvDecoder final : public Decoder {
public:
    // `model` on the CPU, without LoRA adapters (merged first). max_T: cache capacity, 0 = block_size.
    explicit KvDecoder(const Transformer& model, int max_T = 0);

private:
    const float* run(const int32_t* ids, int n) override;
    // The scratch buffers as n rows each.
    DecodeRows rows(int n) const;

    const Transformer& model_;
    Arena cache_;    // "h<l>.qkv": (1, max_T, (NH + 2 KV) * HS) per layer
    Arena scratch_;  // activations of up to max_T new positions (the prefill's width)
};

}  // namespace llmt::models
