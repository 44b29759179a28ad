// Incremental LLaMA inference with a KV cache (one sequence), the Decoder of models/llama.h: the same
// op sequence as Llama::forward on the new positions only, with attention over the cached rows.
// The cache holds each layer's rotated qkv rows (1, max_T, (NH + 2 KV) * head_dim), the layout
// kernels::attention_forward_cached reads: K and V with the model's n_kv_head heads (grouped-query:
// not repeated per query head); the Q slots are scratch for the rows being computed.
#pragma once

#include <cstdint>
#include <span>

#include "core/arena.h"
#include "models/llama.h"

namespace llmt::models {

class LlamaDecoder final : public Decoder {
public:
    // `model` must be on the CPU and outlive the decoder. max_T: cache capacity, 0 = block_size.
    explicit LlamaDecoder(const Llama& model, int max_T = 0);

private:
    const float* run(const int32_t* ids, int n) override;

    const Llama& model_;
    Arena cache_;    // per layer (1, max_T, QKV)
    Arena scratch_;  // activations of up to max_T new positions
};

}  // namespace llmt::models
