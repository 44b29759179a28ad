// The MLP block, written once for every family (models/transformer.h runs it):
//   out = x + down(act(up(norm(x))))
// with act GELU-tanh over fc (GPT-2) or SwiGLU over the fused gate|up projection (LLaMA), LayerNorm or
// RMSNorm, biases or none, and dropout on the branch, all from BlockConfig. Forward and backward over the
// model's activations, and the KV-cache decode of new positions.
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

class MlpBlock : public BlockLayout<MlpBlock> {
public:
    // A layer's activations, in arena order. kMean: LayerNorm only; kUp: the first projection's output
    // (up_width); kAct: the activation's (F); kBranch: down's output before dropout (dropout only); kOut: the
    // block's output on the residual stream.
    enum Act { kNorm, kMean, kRstd, kUp, kAct, kBranch, kOut, kNumActs };
    using Ids = std::array<ActId, kNumActs>;
    struct Scratch {
        ActId d_act = 0, d_up = 0;  // the backward's, shared by every layer (d_act: SwiGLU only)
    };

    explicit MlpBlock(const BlockConfig& c) : c_(c) {}

    // As AttentionBlock's: add_layer, add_shared (BlockLayout), the backward's scratch.
    Scratch add_scratch(ActLayout& a) const;

    // Layer l on x (B,T,C), into out(l); to_out false stops before the down projection (what backward needs
    // when it re-runs the layer, trainer.recompute all).
    void forward(Transformer& m, int l, Tensor x, bool to_out = true) const;
    // trainer.recompute mlp: the activation's output again from its kept input.
    void recompute_activation(Transformer& m, int l) const;
    // As AttentionBlock::backward: dres holds d out(l) and becomes d x (+=); dc is scratch.
    void backward(Transformer& m, int l, Tensor x, Tensor dres, Tensor dc, Tensor x_bias_grad) const;
    // out_bias_grad_for_norm (BlockLayout): down's bias gradient when the next norm's backward sums it.

    // KV-cache decoding: out (1,n,C) = x + the block on x (1,n,C). P: the parameters (f32, CPU).
    void decode(const Arena& P, const MlpParams& p, Tensor out, Tensor x, const DecodeRows& rows) const;

private:
    friend class BlockLayout<MlpBlock>;
    static constexpr const char* kNames[kNumActs] = {"mlp_norm", "mlp_mean", "mlp_rstd", "up",
                                                     "act",      "mlp_branch", "res_out"};
    bool present(Act a) const;
    bool kept_per_layer(Act a) const;
    ActId add(ActLayout& a, const std::string& key, Act act) const;
    static const Ids& ids(const Transformer& m, int l);
    static const MlpParams& params(const Transformer& m, int l);
    static ParamId branch_bias(const MlpParams& p) { return p.down_b; }

    BlockConfig c_;
};

}  // namespace llmt::models
