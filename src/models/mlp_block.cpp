#include "models/mlp_block.h"

#include "kernels/ops.h"
#include "models/lora.h"
#include "models/transformer.h"

namespace llmt::models {

bool MlpBlock::present(Act a) const {
    switch (a) {
        case kMean: return c_.norm == NormKind::kLayerNorm;
        case kBranch: return c_.dropout > 0.f;
        default: return true;
    }
}

bool MlpBlock::kept_per_layer(Act a) const {
    switch (c_.recompute) {
        case Recompute::kNone: return true;
        case Recompute::kMlp: return a != kAct;
        case Recompute::kAll: return a == kOut;  // the next layer's input
    }
    return true;
}

ActId MlpBlock::add(ActLayout& a, const std::string& key, Act act) const {
    switch (act) {
        case kMean: case kRstd: return a.add_f32(key, 1);
        case kUp: return a.add(key, c_.up_width());
        case kAct: return a.add(key, c_.d_ff);
        default: return a.add(key, c_.d_model);
    }
}

MlpBlock::Scratch MlpBlock::add_scratch(ActLayout& a) const {
    Scratch s;
    if (c_.mlp == MlpKind::kSwiglu) s.d_act = a.add("d_f", c_.d_ff);
    s.d_up = a.add(c_.mlp == MlpKind::kSwiglu ? "d_gu" : "d_f", c_.up_width());
    return s;
}

const MlpBlock::Ids& MlpBlock::ids(const Transformer& m, int l) {
    return m.ids_.mlp[static_cast<size_t>(l)];
}

const MlpParams& MlpBlock::params(const Transformer& m, int l) {
    return m.w_.layers[static_cast<size_t>(l)].mlp;
}

void MlpBlock::forward(Transformer& m, int l, Tensor x, bool to_out) const {
    const Ids& id = ids(m, l);
    const MlpParams& p = params(m, l);
    const int64_t C = c_.d_model, U = c_.up_width(), F = c_.d_ff;
    const Tensor normed = m.act(id[kNorm], C), up = m.act(id[kUp], U), act = m.act(id[kAct], F);
    m.norm_forward(p.norm, normed, stats(m, l), x);
    const Tensor up_bias = c_.bias ? m.weight(p.up_b) : Tensor();
    if (c_.mlp == MlpKind::kSwiglu) {
        m.linear_forward(up, normed, p.up, up_bias);
        kernels::swiglu_forward(act, up);
    } else if (m.lora_ && m.lora_->adapts(p.up)) {  // the adapter's delta joins fc before the GELU
        m.linear_forward(up, normed, p.up, up_bias);
        kernels::gelu_forward(act, up);
    } else {  // one cuBLASLt call with the GELU epilogue in bf16
        kernels::matmul_forward_gelu(act, up, normed, m.weight(p.up), up_bias);
    }
    if (!to_out) return;
    m.branch_forward(out(m, l), present(kBranch) ? m.act(id[kBranch], C) : Tensor(), act, p.down,
                     c_.bias ? m.weight(p.down_b) : Tensor(), x, 2 + 2 * l);
}

// The same kernel on the same input as the forward, bit for bit (one exception: bf16 on CUDA fuses the
// forward's GELU into the GEMM epilogue from the fp32 sum, while gelu_forward starts from the bf16-rounded
// pre-activation, so there it differs by bf16 rounding).
void MlpBlock::recompute_activation(Transformer& m, int l) const {
    const Ids& id = ids(m, l);
    const Tensor up = m.act(id[kUp], c_.up_width()), act = m.act(id[kAct], c_.d_ff);
    if (c_.mlp == MlpKind::kSwiglu) return kernels::swiglu_forward(act, up);
    kernels::gelu_forward(act, up);
}

void MlpBlock::backward(Transformer& m, int l, Tensor x, Tensor dres, Tensor dc, Tensor x_bias_grad) const {
    const Ids& id = ids(m, l);
    const MlpParams& p = params(m, l);
    const int64_t C = c_.d_model, U = c_.up_width(), F = c_.d_ff;
    const Tensor up = m.act(id[kUp], U), act = m.act(id[kAct], F), dup = m.act(m.ids_.mlp_d.d_up, U);
    const Tensor down_bias_grad = c_.bias && !m.norm_sums_branch_bias() ? m.grad(p.down_b) : Tensor();
    // dres holds d out = d down's output (the skip passes it to x unchanged); dup becomes d up.
    const Tensor dout = m.branch_grad(dc, dres, 2 + 2 * l);
    if (c_.mlp == MlpKind::kSwiglu) {
        const Tensor dact = m.act(m.ids_.mlp_d.d_act, F);
        m.linear_backward(dact, dout, act, p.down, down_bias_grad);
        kernels::swiglu_backward(dup, dact, up);
    } else if (m.lora_ && m.lora_->adapts(p.down)) {  // d act (with the adapter's share), then the GELU
        m.linear_backward(dup, dout, act, p.down, down_bias_grad);
        kernels::gelu_backward(dup, up, dup);
    } else {  // through the GELU in the same call (the DGELU epilogue in bf16)
        kernels::matmul_backward_gelu(dup, up, m.grad(p.down), down_bias_grad, dout, act, m.weight(p.down));
    }
    m.linear_backward(dc, dup, m.act(id[kNorm], C), p.up, c_.bias ? m.grad(p.up_b) : Tensor());
    m.norm_backward(p.norm, dres, dc, x, stats(m, l), x_bias_grad);
}

void MlpBlock::decode(const Arena& P, const MlpParams& p, Tensor out, Tensor x, const DecodeRows& rows) const {
    auto W = [&](ParamId id) { return P.view(id); };
    norm_forward(c_.norm, rows.norm, {rows.mean, rows.rstd}, x, W(p.norm.w),
                 c_.norm == NormKind::kLayerNorm ? W(p.norm.b) : Tensor(), c_.norm_eps);
    kernels::matmul_forward(rows.up, rows.norm, W(p.up), c_.bias ? W(p.up_b) : Tensor());
    if (c_.mlp == MlpKind::kSwiglu)
        kernels::swiglu_forward(rows.act, rows.up);
    else
        kernels::gelu_forward(rows.act, rows.up);
    // out is the next layer's input: that layer reads it (its norm, its o projection's residual add) before
    // its own down projection rewrites it.
    kernels::matmul_forward(out, rows.act, W(p.down), c_.bias ? W(p.down_b) : Tensor(), x);
}

}  // namespace llmt::models
