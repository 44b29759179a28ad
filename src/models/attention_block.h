// The attention block, written once for every family (models/transformer.h runs it):
//   out = x + o(attention(rope(head_norm(qkv(norm(x))))))
// with LayerNorm or RMSNorm, q|k|v and o biases or none, RMSNorm per q/k head (Qwen3) or none, RoPE or
// not (learned positions are the model's), grouped-query heads, an optional sliding window, and dropout
// on the branch, all from BlockConfig. Forward and backward over the model's activations, and the
// KV-cache decode of new positions.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/arena.h"
#include "models/activations.h"
#include "models/block_config.h"
#include "models/block_layout.h"
#include "models/norm.h"

namespace llmt::models {

class Transformer;

class AttentionBlock : public BlockLayout<AttentionBlock> {
public:
    // A layer's activations, in arena order. kMean: LayerNorm only; kQkvRaw, kQkRstd: the projection's
    // output before the per-head norms and their statistics (qk_norm only); kBranch: the o projection's
    // output before dropout (dropout only); kOut: the block's output on the residual stream.
    enum Act { kNorm, kMean, kRstd, kQkvRaw, kQkRstd, kQkv, kAtty, kLse, kBranch, kOut, kNumActs };
    using Ids = std::array<ActId, kNumActs>;
    struct Scratch {
        ActId d_qkv = 0, d_att = 0;  // the backward's, shared by every layer
    };

    explicit AttentionBlock(const BlockConfig& c) : c_(c) {}

    // add_layer, add_shared (BlockLayout): layer l's activations kept per layer (trainer.recompute decides
    // which), one block's worth of the others shared by every layer; and the backward's scratch.
    Scratch add_scratch(ActLayout& a) const;

    // Layer l on x (B,T,C), into out(l).
    void forward(Transformer& m, int l, Tensor x) const;
    // dres (B,T,C) holds d out(l) and becomes d x (+=: the residual stream); dc (B,T,C) is scratch.
    // x_bias_grad: the bias gradient of the projection that wrote x, for the norm's backward to sum (or empty).
    void backward(Transformer& m, int l, Tensor x, Tensor dres, Tensor dc, Tensor x_bias_grad) const;
    // out_bias_grad_for_norm (BlockLayout): the o projection's bias gradient when the next norm's backward
    // sums it (LayerNorm without dropout: then it is the column sums of the residual stream's gradient the
    // norm leaves), else empty.

    // KV-cache decoding: out (1,n,C) = x + the block on x (1,n,C), the new positions t0..t0+n-1, whose q|k|v
    // rows it writes into `cache` (1, max_T, (NH + 2 KV) * HS) before attending over rows 0..t0+n-1.
    // P: the parameters (f32, CPU); rope: the model's table (RoPE only).
    void decode(const Arena& P, const AttentionParams& p, Tensor out, Tensor x, Tensor cache, int t0,
                const DecodeRows& rows, Tensor rope) const;

private:
    friend class BlockLayout<AttentionBlock>;
    static constexpr const char* kNames[kNumActs] = {"attn_norm", "attn_mean", "attn_rstd", "qkv_raw",
                                                     "qk_rstd",   "qkv",       "atty",      "lse",
                                                     "attn_branch", "res_mid"};
    bool present(Act a) const;
    bool kept_per_layer(Act a) const;
    ActId add(ActLayout& a, const std::string& key, Act act) const;
    static const Ids& ids(const Transformer& m, int l);
    static const AttentionParams& params(const Transformer& m, int l);
    static ParamId branch_bias(const AttentionParams& p) { return p.o_b; }
    // Whether the attention backward's own passes sum q|k|v's bias gradient: when its dqkv reaches the
    // projection unchanged (no RoPE, no per-head norms); else the projection's backward does.
    bool bias_grad_in_attention() const { return !c_.rope && !c_.qk_norm; }

    BlockConfig c_;
};

}  // namespace llmt::models
