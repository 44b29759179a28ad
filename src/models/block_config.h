// What the shared transformer blocks (models/attention_block.h, models/mlp_block.h) are configured by: the
// parts in which GPT-2, LLaMA and the families on LLaMA's graph differ, and each block's parameter handles.
// A family's file turns its config into a BlockConfig and fills the handles from its tensor table; the
// blocks pick their kernels from the config (models/transformer.h runs them).
#pragma once

#include <cstdint>

#include "models/model.h"

namespace llmt::models {

enum class NormKind { kLayerNorm, kRmsNorm };  // LayerNorm (weight and bias, GPT-2) or RMSNorm (weight, LLaMA)
enum class MlpKind { kGelu, kSwiglu };         // GELU-tanh(fc(x)) (GPT-2) or silu(gate(x)) * up(x) (LLaMA)

struct BlockConfig {
    int d_model = 0, n_head = 0, n_kv_head = 0, head_dim = 0, d_ff = 0;
    NormKind norm = NormKind::kRmsNorm;  // before the attention, the MLP and the head
    float norm_eps = 1e-5f;
    bool bias = false;      // biases on every projection: q|k|v, o, the MLP's two (GPT-2)
    bool qkv_bias = false;  // biases on q, k and v only (Qwen2)
    bool qk_norm = false;   // RMSNorm over each query and key head before RoPE (Qwen3)
    bool rope = false;      // rotary q and k; without, the model adds learned positions to the embeddings
    int window = 0;         // sliding window: query t sees keys t - window < j <= t (Mistral); 0 = none
    MlpKind mlp = MlpKind::kSwiglu;
    float dropout = 0.f;    // on the embeddings and each residual branch in training (GPT-2); 0 = none
    Recompute recompute = Recompute::kNone;

    int64_t qkv_width() const { return static_cast<int64_t>(n_head + 2 * n_kv_head) * head_dim; }
    int64_t att_width() const { return static_cast<int64_t>(n_head) * head_dim; }
    // The MLP's first projection: fc (F) or the fused gate|up (2F).
    int64_t up_width() const { return mlp == MlpKind::kSwiglu ? 2 * static_cast<int64_t>(d_ff) : d_ff; }
    bool has_qkv_bias() const { return bias || qkv_bias; }
};

// Handles into the family's tensor table; a handle the config does not use is never read.
struct NormParams {
    ParamId w = 0, b = 0;  // b: LayerNorm only
};
struct AttentionParams {
    NormParams norm;
    ParamId qkv = 0, qkv_b = 0;     // the fused q|k|v projection ((NH + 2 KV) * HS, C) and its bias
    ParamId q_norm = 0, k_norm = 0;  // (HS) each, with qk_norm
    ParamId o = 0, o_b = 0;          // (C, NH * HS) and its bias
};
struct MlpParams {
    NormParams norm;
    ParamId up = 0, up_b = 0;      // fc (F, C) or gate|up (2F, C), and its bias
    ParamId down = 0, down_b = 0;  // (C, F) and its bias
};
struct LayerParams {
    AttentionParams attn;
    MlpParams mlp;
};

// A KV-cache decoding pass's buffers for its n new positions (models/kv_decoder.h), each (1, n, width);
// qkv_raw and qk_rstd with qk_norm only.
struct DecodeRows {
    Tensor norm, mean, rstd;  // (C), (1), (1)
    Tensor qkv_raw, qk_rstd;  // ((NH + 2 KV) * HS), (NH + KV)
    Tensor atty;              // (NH * HS)
    Tensor up, act;           // (up_width), (F)
};

}  // namespace llmt::models
