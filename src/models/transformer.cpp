#include "models/transformer.h"

#include "core/check.h"
#include "core/error.h"
#include "kernels/attention_scratch.h"
#include "kernels/ops.h"
#include "models/kv_decoder.h"
#include "models/lm_head.h"

namespace llmt::models {

Transformer::Transformer(TransformerShape shape)
    : shape_(std::move(shape)), attn_(shape_.block), mlp_(shape_.block) {
    dims_ = {shape_.n_layer, shape_.block.d_model, shape_.block_size, shape_.vocab_size, shape_.padded_vocab};
}

void Transformer::finish_layout(const LoraSpec& lora, Device device, DType dtype) {
    layout_params(lora, device, dtype);
    activation_layout(1, 1, &ids_);  // the handles (the same for every (B, T))
}

void Transformer::allocate(const std::vector<float>& rope_rows) {
    // ZeRO-3: the model's own weights, trained, or frozen under LoRA (whose adapters stay whole).
    if (shape_.shard.on()) store_.shard_groups(shard_units(), shape_.shard.world, shape_.shard.rank);
    allocate_params();
    if (!block().rope) return;
    const int64_t rows = shape_.block_size, HD = block().head_dim;
    LLMT_INTERNAL_CHECK(static_cast<int64_t>(rope_rows.size()) == rows * HD, "{}: RoPE table of {} values for {} x {}",
                        arch(), rope_rows.size(), rows, HD);
    rope_.add("rope", {rows, HD});
    rope_.allocate(false, device());
    kernels::copy(rope(), Tensor(const_cast<float*>(rope_rows.data()), {rows, HD}));
}

std::vector<ParamId> Transformer::shard_units() const {
    std::vector<ParamId> firsts = {0};
    for (const auto& l : w_.layers) firsts.push_back(l.attn.norm.w);
    firsts.push_back(w_.norm.w);
    return firsts;
}

Tensor Transformer::rope() const { return block().rope ? rope_.view(size_t{0}) : Tensor(); }

Arena Transformer::activation_layout(int B, int T, Acts* ids) const {
    const BlockConfig& c = block();
    const int64_t BT = static_cast<int64_t>(B) * T, C = c.d_model;
    ActLayout a(shape_.arch, BT, store_.dtype());  // activations in the compute dtype, statistics in fp32
    Acts h;
    h.embedded = a.add("embedded", C);
    for (int l = 0; l < shape_.n_layer; ++l) {
        h.attn.push_back(attn_.add_layer(a, l));
        h.mlp.push_back(mlp_.add_layer(a, l));
    }
    // trainer.recompute: one layer's worth of the activations not kept per layer, rewritten by every layer.
    attn_.add_shared(a, h.attn);
    mlp_.add_shared(a, h.mlp);
    h.norm = a.add("norm", C);
    if (c.norm == NormKind::kLayerNorm) h.norm_mean = a.add_f32("norm_mean", 1);
    h.norm_rstd = a.add_f32("norm_rstd", 1);
    h.logits = add_lm_head_logits(a, shape_.padded_vocab);  // after the per-row buffers: its budget
    h.losses = a.add_f32("losses", 1);
    // Backward scratch, reused by every layer (llm.c's CUDA layout): the residual stream's gradient, one
    // C-wide buffer (first the head's gradient w.r.t. the final norm, written by the forward), the blocks'.
    h.d_residual = a.add("d_residual", C);
    h.d_c = a.add("d_c", C);
    h.attn_d = attn_.add_scratch(a);
    h.mlp_d = mlp_.add_scratch(a);
    h.inputs = a.add_i32("inputs", 1);  // token ids, targets and position ids where the kernels read them
    h.targets = a.add_i32("targets", 1);
    if (c.rope) h.positions = a.add_i32("positions", 1);  // begin_forward refuses position ids without
    if (ids) *ids = h;
    return a.take();
}

void Transformer::norm_forward(const NormParams& p, Tensor out, NormStats stats, Tensor x) const {
    const BlockConfig& c = block();
    models::norm_forward(c.norm, out, stats, x, weight(p.w), c.norm == NormKind::kLayerNorm ? weight(p.b) : Tensor(),
                         c.norm_eps);
}

void Transformer::norm_backward(const NormParams& p, Tensor dx, Tensor dout, Tensor x, NormStats stats,
                                Tensor dx_colsum) {
    const NormKind kind = block().norm;
    const Tensor db = kind == NormKind::kLayerNorm ? grad_or_sink(p.b, 1) : Tensor();
    models::norm_backward(kind, dx, grad_or_sink(p.w, 0), db, dout, x, weight(p.w), stats, dx_colsum);
}

// Dropout in place on the branch before it is added; nothing that backward reads is overwritten (matmul
// backward reads inputs, never outputs). The masks are stateless, so a re-run layer draws the same ones.
void Transformer::branch_forward(Tensor out, Tensor branch, Tensor inp, ParamId w, Tensor bias, Tensor x, int site) {
    if (!dropped_) return linear_forward(out, inp, w, bias, x);
    linear_forward(branch, inp, w, bias);
    kernels::dropout_forward(branch, branch, block().dropout, dropout_seed_ + static_cast<uint64_t>(site));
    kernels::residual_forward(out, x, branch);
}

// The residual stream's own gradient passes the add unchanged; the branch's is dropout'(dres) with the
// forward's mask.
Tensor Transformer::branch_grad(Tensor scratch, Tensor dres, int site) const {
    if (!dropped_) return dres;
    kernels::dropout_backward(scratch, dres, block().dropout, dropout_seed_ + static_cast<uint64_t>(site));
    return scratch;
}

Tensor Transformer::embed_forward() {
    Tensor x = act(ids_.embedded, block().d_model);
    kernels::encoder_forward(x, stat(ids_.inputs), weight(w_.embed), block().rope ? Tensor() : weight(w_.positions));
    if (dropped_) kernels::dropout_forward(x, x, block().dropout, dropout_seed_);  // site 0
    return x;
}

float Transformer::forward(const int32_t* inputs, const int32_t* targets, int B, int T, bool train, float loss_scale,
                           const int32_t* positions) {
    // Without RoPE the activations have no "positions" buffer, so begin_forward refuses position ids.
    const Batch batch = begin_forward(
        acts_, [this](int b, int t) { return activation_layout(b, t); }, inputs, targets, B, T, train, positions);
    positions_ = batch.positions;
    dropped_ = train && block().dropout > 0.f;
    const int64_t C = block().d_model, BT = static_cast<int64_t>(B) * T;
    // ZeRO-3: each unit held while it computes; tied embeddings stay held (with the gradient the head adds
    // in this forward) until backward's embedding gradient, the head's unit until backward's final norm.
    hold(0, train && tied());
    prefetch(1);  // the next unit's gather overlaps this one's compute
    Tensor x = embed_forward();
    if (!train || !tied()) drop(0);
    for (int l = 0; l < shape_.n_layer; ++l) {
        hold(1 + l, false);
        prefetch(2 + l);
        attn_.forward(*this, l, x);
        mlp_.forward(*this, l, attn_.out(*this, l));
        drop(1 + l);
        x = mlp_.out(*this, l);
    }
    hold(head_unit(), train);
    if (!train && tied()) hold(0, false);
    norm_forward(w_.norm, act(ids_.norm, C), final_stats(), x);
    // The head's backward runs in the forward, chunk by chunk, leaving d norm in d_c for backward().
    const HeadBuffers buf{lm_head_scratch(acts_, ids_.logits, shape_.padded_vocab),
                          acts_.shaped(ids_.losses, {BT}), acts_.shaped(ids_.targets, {BT}),
                          acts_.shaped(ids_.d_c, {BT, C})};
    has_grad_ = train;
    const float loss = head_forward(batch, targets, acts_.shaped(ids_.norm, {BT, C}), w_.head, buf, train, loss_scale);
    if (!train) {
        drop(head_unit());
        if (tied()) drop(0);
    }
    return loss;
}

void Transformer::recompute(int l, Tensor x) {
    if (block().recompute == Recompute::kAll) {
        attn_.forward(*this, l, x);
        mlp_.forward(*this, l, attn_.out(*this, l), /*to_out=*/false);
    }
    if (block().recompute == Recompute::kMlp) mlp_.recompute_activation(*this, l);
}

void Transformer::backward() {
    LLMT_INTERNAL_CHECK(has_grad_, "{} backward: call forward(..., train = true) first", arch());
    const int L = shape_.n_layer;
    const int64_t C = block().d_model;
    const Tensor dres = act(ids_.d_residual, C), dc = act(ids_.d_c, C);
    // dc holds d norm (the forward ran the head's backward); the residual stream accumulates (+=).
    kernels::zero(dres);
    prefetch(L);  // the last block, while the final norm's backward runs
    norm_backward(w_.norm, dres, dc, mlp_.out(*this, L - 1), final_stats(), mlp_.out_bias_grad_for_norm(*this, L - 1));
    drop(head_unit());
    // The table holds the embeddings, the layers in order, the final norm, then the head: what backward has
    // finished is always a suffix of it.
    grads_ready_from(w_.norm.w);
    for (int l = L - 1; l >= 0; --l) {
        const Tensor x = layer_input(l);
        hold(1 + l, true);  // recompute included
        prefetch(l);        // the block before (or the embeddings)
        recompute(l, x);
        mlp_.backward(*this, l, attn_.out(*this, l), dres, dc, attn_.out_bias_grad_for_norm(*this, l));
        attn_.backward(*this, l, x, dres, dc, l > 0 ? mlp_.out_bias_grad_for_norm(*this, l - 1) : Tensor());
        drop(1 + l);
        grads_ready_from(w_.layers[static_cast<size_t>(l)].attn.norm.w);
    }
    if (dropped_) kernels::dropout_backward(dres, dres, block().dropout, dropout_seed_);
    hold(0, true);
    if (!store_.frozen())
        kernels::encoder_backward(grad(w_.embed), block().rope ? Tensor() : grad(w_.positions), dres,
                                  stat(ids_.inputs));
    drop(0);
    grads_ready_all();
    has_grad_ = false;
}

MemoryPlan Transformer::memory_plan(int B, int T) const {
    const size_t rope_bytes =
        block().rope ? static_cast<size_t>(shape_.block_size) * block().head_dim * sizeof(float) : 0;
    MemoryPlan m = params_memory_plan(B, T);
    const BlockConfig& c = block();
    m.activations += activation_layout(B, T).nbytes() + rope_bytes +
                     kernels::attention_backward_scratch_bytes(store_.device(), B, T, c.att_width(), c.n_head,
                                                               c.n_kv_head, c.head_dim);
    return m;
}

std::unique_ptr<Decoder> Transformer::decoder(int max_T) const { return std::make_unique<KvDecoder>(*this, max_T); }

}  // namespace llmt::models
