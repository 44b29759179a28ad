// The activation layout the attention and MLP blocks share (models/attention_block.h, models/mlp_block.h):
// each activation a block's configuration uses is either kept per layer, named "h<l>.<name>", or laid out
// once as "blk.<name>" and shared by every layer (trainer.recompute: the layer whose backward needs it
// rewrites it). A block derives from BlockLayout<Block> and declares it a friend; it provides
//   enum Act {..., kNumActs};  using Ids = std::array<ActId, kNumActs>;
//   bool present(Act) const;         whether the configuration uses the activation
//   bool kept_per_layer(Act) const;  per layer, else shared
//   ActId add(ActLayout&, const std::string& key, Act) const;  lays one out (its width and dtype)
//   static constexpr const char* kNames[kNumActs];  their names in the arena
//   static const Ids& ids(const Transformer&, int l);  layer l's ids in the model's layout
//   static const Params& params(const Transformer&, int l);  layer l's parameters
//   static ParamId branch_bias(const Params&);  the bias of the projection onto the residual stream
// where Act starts with the norm's output and statistics (kNorm, kMean: LayerNorm only, kRstd) and has
// the block's output on the residual stream (kOut). The model (models/transformer.h) declares
// BlockLayout<Block> a friend.
#pragma once

#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/tensor.h"
#include "models/activations.h"
#include "models/norm.h"

namespace llmt::models {

template <class Block>
class BlockLayout {
public:
    // Layer l's activations kept per layer; the others' ids stay 0 until add_shared.
    auto add_layer(ActLayout& a, int l) const {
        typename Block::Ids ids{};
        for (int i = 0; i < Block::kNumActs; ++i) {
            const auto act = static_cast<typename Block::Act>(i);
            if (block().present(act) && block().kept_per_layer(act))
                ids[i] = block().add(a, fmt::format("h{}.{}", l, Block::kNames[i]), act);
        }
        return ids;
    }

    // One block's worth of the others, shared by every layer of `layers`.
    template <class Ids>
    void add_shared(ActLayout& a, std::vector<Ids>& layers) const {
        for (int i = 0; i < Block::kNumActs; ++i) {
            const auto act = static_cast<typename Block::Act>(i);
            if (!block().present(act) || block().kept_per_layer(act)) continue;
            const ActId shared = block().add(a, std::string("blk.") + Block::kNames[i], act);
            for (Ids& ids : layers) ids[i] = shared;
        }
    }

    // Layer l's output (B,T,C) and norm statistics in model m's last forward.
    template <class Model>
    Tensor out(const Model& m, int l) const {
        return m.act(Block::ids(m, l)[Block::kOut], m.block().d_model);
    }
    template <class Model>
    NormStats stats(const Model& m, int l) const {
        const auto& id = Block::ids(m, l);
        return {block().present(Block::kMean) ? m.stat(id[Block::kMean]) : Tensor(), m.stat(id[Block::kRstd])};
    }

    // The bias gradient of the projection onto the residual stream when the next norm's backward sums it
    // (Model::norm_sums_branch_bias), else empty.
    template <class Model>
    Tensor out_bias_grad_for_norm(const Model& m, int l) const {
        return m.norm_sums_branch_bias() ? m.grad(Block::branch_bias(Block::params(m, l))) : Tensor();
    }

private:
    const Block& block() const { return static_cast<const Block&>(*this); }
};

}  // namespace llmt::models
