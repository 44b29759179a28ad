#include "models/attention_block.h"

#include "kernels/ops.h"
#include "models/transformer.h"

namespace llmt::models {

bool AttentionBlock::present(Act a) const {
    switch (a) {
        case kMean: return c_.norm == NormKind::kLayerNorm;
        case kQkvRaw: case kQkRstd: return c_.qk_norm;
        case kBranch: return c_.dropout > 0.f;
        default: return true;
    }
}

// recompute none and mlp keep every attention activation; all keeps none (only the MLP's output).
bool AttentionBlock::kept_per_layer(Act) const { return c_.recompute != Recompute::kAll; }

ActId AttentionBlock::add(ActLayout& a, const std::string& key, Act act) const {
    switch (act) {
        case kMean: case kRstd: return a.add_f32(key, 1);
        case kQkRstd: return a.add_f32(key, c_.n_head + c_.n_kv_head);
        case kLse: return a.add_f32(key, c_.n_head);
        case kQkvRaw: case kQkv: return a.add(key, c_.qkv_width());
        case kAtty: return a.add(key, c_.att_width());
        default: return a.add(key, c_.d_model);
    }
}

AttentionBlock::Scratch AttentionBlock::add_scratch(ActLayout& a) const {
    Scratch s;
    s.d_qkv = a.add("d_qkv", c_.qkv_width());
    s.d_att = a.add("d_att", c_.att_width());
    return s;
}

const AttentionBlock::Ids& AttentionBlock::ids(const Transformer& m, int l) {
    return m.ids_.attn[static_cast<size_t>(l)];
}

const AttentionParams& AttentionBlock::params(const Transformer& m, int l) {
    return m.w_.layers[static_cast<size_t>(l)].attn;
}

void AttentionBlock::forward(Transformer& m, int l, Tensor x) const {
    const Ids& id = ids(m, l);
    const AttentionParams& p = params(m, l);
    const int64_t C = c_.d_model, QKV = c_.qkv_width(), A = c_.att_width();
    const int NH = c_.n_head, KV = c_.n_kv_head;
    const Tensor normed = m.act(id[kNorm], C), qkv = m.act(id[kQkv], QKV), atty = m.act(id[kAtty], A);
    const Tensor lse = m.acts_.shaped(id[kLse], {m.B_, NH, m.T_});
    m.norm_forward(p.norm, normed, stats(m, l), x);
    const Tensor bias = c_.has_qkv_bias() ? m.weight(p.qkv_b) : Tensor();  // added in the GEMM's epilogue
    if (c_.qk_norm) {  // each q and k head RMS-normalised before RoPE
        const Tensor raw = m.act(id[kQkvRaw], QKV);
        m.linear_forward(raw, normed, p.qkv, bias);
        kernels::head_rmsnorm_forward(qkv, m.acts_.shaped(id[kQkRstd], {m.B_, m.T_, NH + KV}), raw, m.weight(p.q_norm),
                                      m.weight(p.k_norm), NH, KV, c_.norm_eps);
    } else {
        m.linear_forward(qkv, normed, p.qkv, bias);
    }
    if (c_.rope) kernels::rope_forward(qkv, m.rope(), NH, KV, 0, m.positions());
    kernels::attention_forward(atty, lse, qkv, NH, KV, m.positions(), c_.window);
    m.branch_forward(out(m, l), present(kBranch) ? m.act(id[kBranch], C) : Tensor(), atty, p.o,
                     c_.bias ? m.weight(p.o_b) : Tensor(), x, 1 + 2 * l);
}

void AttentionBlock::backward(Transformer& m, int l, Tensor x, Tensor dres, Tensor dc, Tensor x_bias_grad) const {
    const Ids& id = ids(m, l);
    const AttentionParams& p = params(m, l);
    const int64_t C = c_.d_model, QKV = c_.qkv_width(), A = c_.att_width();
    const int NH = c_.n_head, KV = c_.n_kv_head;
    const Tensor dqkv = m.act(m.ids_.attn_d.d_qkv, QKV), datt = m.act(m.ids_.attn_d.d_att, A);
    const Tensor qkv = m.act(id[kQkv], QKV), atty = m.act(id[kAtty], A);
    const Tensor lse = m.acts_.shaped(id[kLse], {m.B_, NH, m.T_});
    const Tensor qkv_bias_grad = c_.has_qkv_bias() ? m.grad(p.qkv_b) : Tensor();
    // The o projection's bias gradient here unless the next norm's backward summed it already.
    const Tensor o_bias_grad = c_.bias && !m.norm_sums_branch_bias() ? m.grad(p.o_b) : Tensor();
    // dres holds d out = d o's output (the skip passes it to x unchanged).
    m.linear_backward(datt, m.branch_grad(dc, dres, 1 + 2 * l), atty, p.o, o_bias_grad);
    kernels::attention_backward(dqkv, datt, qkv, atty, lse, NH, KV,
                                bias_grad_in_attention() ? qkv_bias_grad : Tensor(), m.positions(), c_.window);
    // Gradients w.r.t. the rotated q, k back to the projection's (or the per-head norms') outputs.
    if (c_.rope) kernels::rope_backward(dqkv, m.rope(), NH, KV, m.positions());
    if (c_.qk_norm)  // in place: d normed q/k -> d projection output
        kernels::head_rmsnorm_backward(dqkv, m.grad_or_sink(p.q_norm, 0), m.grad_or_sink(p.k_norm, 1), dqkv,
                                       m.act(id[kQkvRaw], QKV), m.weight(p.q_norm), m.weight(p.k_norm),
                                       m.acts_.shaped(id[kQkRstd], {m.B_, m.T_, NH + KV}), NH, KV);
    m.linear_backward(dc, dqkv, m.act(id[kNorm], C), p.qkv, bias_grad_in_attention() ? Tensor() : qkv_bias_grad);
    m.norm_backward(p.norm, dres, dc, x, stats(m, l), x_bias_grad);
}

void AttentionBlock::decode(const Arena& P, const AttentionParams& p, Tensor out, Tensor x, Tensor cache, int t0,
                            const DecodeRows& rows, Tensor rope) const {
    auto W = [&](ParamId id) { return P.view(id); };
    const int64_t n = x.dim(1), QKV = c_.qkv_width();
    const int NH = c_.n_head, KV = c_.n_kv_head;
    // The new positions' q|k|v rows go straight into the cache (its q slots are scratch).
    const Tensor qkv_new(static_cast<float*>(cache.data) + static_cast<int64_t>(t0) * QKV, {1, n, QKV});
    norm_forward(c_.norm, rows.norm, {rows.mean, rows.rstd}, x, W(p.norm.w),
                 c_.norm == NormKind::kLayerNorm ? W(p.norm.b) : Tensor(), c_.norm_eps);
    const Tensor bias = c_.has_qkv_bias() ? W(p.qkv_b) : Tensor();
    if (c_.qk_norm) {
        kernels::matmul_forward(rows.qkv_raw, rows.norm, W(p.qkv), bias);
        kernels::head_rmsnorm_forward(qkv_new, rows.qk_rstd, rows.qkv_raw, W(p.q_norm), W(p.k_norm), NH, KV,
                                      c_.norm_eps);
    } else {
        kernels::matmul_forward(qkv_new, rows.norm, W(p.qkv), bias);
    }
    if (c_.rope) kernels::rope_forward(qkv_new, rope, NH, KV, t0);  // positions t0..t0+n-1
    kernels::attention_forward_cached(rows.atty, cache, t0, NH, KV, c_.window);
    kernels::matmul_forward(out, rows.atty, W(p.o), c_.bias ? W(p.o_b) : Tensor(), x);
}

}  // namespace llmt::models
