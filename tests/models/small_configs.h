// The small models the CPU model tests start from, each test setting what it varies on top (tied
// embeddings, RoPE scaling, recompute, LoRA, wider layers): 2 layers, 4 query heads, d_model 32, a
// 50-token vocabulary padded to 64. The sizes keep finite-difference and reference checks fast and
// exercise the padding (V < Vp) and, for LLaMA, grouped-query attention (2 KV heads).
#pragma once

#include "models/gpt2.h"
#include "models/llama.h"

namespace llmt::models::test {

// LLaMA: 4 query heads over 2 KV heads, SwiGLU width 48.
inline LlamaConfig small_llama(int block_size) {
    LlamaConfig c;
    c.n_layer = 2;
    c.n_head = 4;
    c.n_kv_head = 2;
    c.d_model = 32;
    c.d_ff = 48;
    c.block_size = block_size;
    c.vocab_size = 50;
    c.padded_vocab = 64;
    return c;
}

// GPT-2: 4 heads, MLP width 128.
inline Gpt2Config small_gpt2(int block_size) {
    Gpt2Config c;
    c.n_layer = 2;
    c.n_head = 4;
    c.d_model = 32;
    c.d_ff = 128;
    c.block_size = block_size;
    c.vocab_size = 50;
    c.padded_vocab = 64;
    return c;
}

}  // namespace llmt::models::test
