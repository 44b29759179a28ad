// The decoder-only transformer every language model here is (GPT-2, LLaMA and the families on LLaMA's
// graph): the token embedding (plus learned positions without RoPE), n_layer layers of an attention block
// and an MLP block on the residual stream (models/attention_block.h, models/mlp_block.h), a final norm and
// the chunked LM head (models/lm_head.h). The forward, the explicit backward, the activation layout and
// the KV-cache decoder (models/kv_decoder.h) are written once, here and in the blocks; a family
// (models/gpt2.cpp, models/llama.cpp) is a BlockConfig plus a tensor table that fills weights().
// The table's order is the gradient arena's, and backward reports finished suffixes of it
// (Model::grads_ready_from): the embeddings first, then each layer's tensors starting with its attention
// norm's weight, then the final norm and the head.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/activations.h"
#include "models/attention_block.h"
#include "models/block_config.h"
#include "models/language_model.h"
#include "models/mlp_block.h"
#include "models/norm.h"

namespace llmt::models {

struct TransformerShape {
    std::string arch;  // the family (Model::arch)
    int n_layer = 0;
    int block_size = 0;  // maximum T
    int vocab_size = 0, padded_vocab = 0;
    BlockConfig block;
    ParamShard shard;  // ZeRO-3: allocate this rank's chunks of the units only
};

class Transformer : public LanguageModel {
public:
    std::string_view arch() const override { return shape_.arch; }
    float forward(const int32_t* inputs, const int32_t* targets, int B, int T, bool train, float loss_scale = 1.f,
                  const int32_t* positions = nullptr) override;
    // Dropout masks are stateless (kernels/cpu/dropout.h): site k (0 = embeddings, 1 + 2l / 2 + 2l = layer
    // l's attention / MLP branch) uses the dropout seed + k, so resume reproduces them exactly.
    void backward() override;
    MemoryPlan memory_plan(int B, int T) const override;
    std::unique_ptr<Decoder> decoder(int max_T = 0) const override;
    // The units: the embeddings (0), layer l (1 + l), the final norm with an untied head (n_layer + 1).
    std::vector<ParamId> shard_units() const override;

    struct Weights {
        ParamId embed = 0;      // (Vp, C)
        ParamId positions = 0;  // the learned position table (block_size, C); without RoPE only
        NormParams norm;        // the final norm
        ParamId head = 0;       // (Vp, C); == embed when tied
        std::vector<LayerParams> layers;
    };
    const Weights& weights() const { return w_; }
    const BlockConfig& block() const { return shape_.block; }
    const AttentionBlock& attention() const { return attn_; }
    const MlpBlock& mlp() const { return mlp_; }
    // The RoPE table (block_size, head_dim) f32 on the model's device; empty without RoPE.
    Tensor rope() const;

protected:
    explicit Transformer(TransformerShape shape);
    // After the family's table has filled w_: lays out the parameters (and the LoRA adapters) and takes
    // the activation handles. Nothing is allocated (a family's memory plan needs no memory).
    void finish_layout(const LoraSpec& lora, Device device, DType dtype);
    // Allocates the parameters and, with RoPE, the table `rope_rows` (block_size x head_dim, rope.h).
    void allocate(const std::vector<float>& rope_rows);

    Weights w_;

private:
    friend class AttentionBlock;
    friend class MlpBlock;
    friend class BlockLayout<AttentionBlock>;  // the blocks' shared activation layout (models/block_layout.h)
    friend class BlockLayout<MlpBlock>;

    struct Acts {
        ActId embedded = 0, norm = 0, norm_mean = 0, norm_rstd = 0, logits = 0, losses = 0, d_residual = 0, d_c = 0,
              inputs = 0, targets = 0, positions = 0;  // norm_mean: LayerNorm only; positions: RoPE only
        std::vector<AttentionBlock::Ids> attn;  // per layer; shared (recomputed) buffers repeat an id
        std::vector<MlpBlock::Ids> mlp;
        AttentionBlock::Scratch attn_d;  // the backward's scratch, shared by every layer
        MlpBlock::Scratch mlp_d;
    };
    Arena activation_layout(int B, int T, Acts* ids = nullptr) const;
    // The embeddings of the last forward's inputs (with dropout, site 0), into `embedded`.
    Tensor embed_forward();
    // trainer.recompute: what layer l's backward needs and the forward did not keep, rewritten from its
    // input x by the same kernels on the same inputs (bit for bit what the forward wrote).
    void recompute(int l, Tensor x);
    NormStats final_stats() const {
        return {block().norm == NormKind::kLayerNorm ? stat(ids_.norm_mean) : Tensor(), stat(ids_.norm_rstd)};
    }
    Tensor layer_input(int l) const { return l == 0 ? act(ids_.embedded, block().d_model) : mlp_.out(*this, l - 1); }

    // For the blocks: views of the last forward's (B, T) activations, weights, and the parts they share.
    Tensor act(ActId id, int64_t width) const { return acts_.btc(id, B_, T_, width); }
    Tensor stat(ActId id) const { return acts_.bt(id, B_, T_); }
    Tensor weight(ParamId id) const { return store_.weight(id); }
    // A parameter's gradient, empty when the base is frozen (nothing computes it then).
    Tensor grad(ParamId id) const { return store_.grad(id); }
    void norm_forward(const NormParams& p, Tensor out, NormStats stats, Tensor x) const;
    // dx += through the norm; its weight's (and bias's) gradient +=, into a sink when the base is frozen.
    void norm_backward(const NormParams& p, Tensor dx, Tensor dout, Tensor x, NormStats stats, Tensor dx_colsum);
    // out = x + dropout(inp @ w^T + bias) (dropout, site `site`, in training with BlockConfig::dropout: then
    // into `branch` first; else one GEMM with the residual add fused).
    void branch_forward(Tensor out, Tensor branch, Tensor inp, ParamId w, Tensor bias, Tensor x, int site);
    // The gradient of the branch before its dropout: dres itself, or with dropout the mask applied into scratch.
    Tensor branch_grad(Tensor scratch, Tensor dres, int site) const;
    // Whether a norm's backward sums the bias gradient of the branch projection before it (o, the MLP's
    // down: LayerNorm, biases, no dropout): then it is the column sums of the residual stream's gradient
    // that the norm's pass leaves, which the GEMM's backward need not compute again. Not under ZeRO-3: the
    // bias belongs to the unit before the norm's, which is not held then.
    bool norm_sums_branch_bias() const {
        return block().bias && block().norm == NormKind::kLayerNorm && !dropped_ && !gather_;
    }
    Tensor positions() const { return positions_; }
    // ZeRO-3 (Model::set_unit_gather): unit u's weights (and gradients) held from hold() to drop().
    void hold(int unit, bool grads) {
        if (gather_) gather_->acquire(unit, grads);
    }
    void drop(int unit) {
        if (gather_) gather_->release(unit);
    }
    void prefetch(int unit) {
        if (gather_) gather_->prefetch(unit);
    }
    int head_unit() const { return shape_.n_layer + 1; }
    bool tied() const { return w_.head == w_.embed; }

    TransformerShape shape_;
    AttentionBlock attn_;
    MlpBlock mlp_;
    Acts ids_;
    Activations acts_;
    Arena rope_;        // (block_size, head_dim) f32 on the device, with RoPE
    Tensor positions_;  // of the last forward (packed examples), or empty
    bool has_grad_ = false;  // the last forward prepared the head's gradient
    bool dropped_ = false;   // the last forward applied dropout (backward must too)
};

}  // namespace llmt::models
