#include "models/kv_decoder.h"

#include <fmt/format.h>

#include "kernels/ops.h"
#include "models/transformer.h"

namespace llmt::models {

KvDecoder::KvDecoder(const Transformer& model, int max_T) : Decoder(model, max_T), model_(model) {
    const BlockConfig& c = model.block();
    const int64_t T = capacity(), C = c.d_model;
    for (int l = 0; l < model.dims().n_layer; ++l) cache_.add(fmt::format("h{}.qkv", l), {1, T, c.qkv_width()});
    cache_.allocate(false);  // rows are written before they are read (positions < position() only)
    for (const char* n : {"x", "norm", "res_mid", "res_out"}) scratch_.add(n, {T * C});
    scratch_.add("atty", {T * c.att_width()});
    scratch_.add("up", {T * c.up_width()});
    scratch_.add("act", {T * c.d_ff});
    if (c.norm == NormKind::kLayerNorm) scratch_.add("mean", {T});
    scratch_.add("rstd", {T});
    if (c.qk_norm) {  // the projection's output before the per-head norms, and their statistics
        scratch_.add("qkv_raw", {T * c.qkv_width()});
        scratch_.add("qk_rstd", {T * (c.n_head + c.n_kv_head)});
    }
    scratch_.add("logits", {model.dims().padded_vocab});
    scratch_.allocate(false);
}

DecodeRows KvDecoder::rows(int n) const {
    const BlockConfig& c = model_.block();
    auto S = [&](const char* name, int64_t width) { return Tensor(scratch_.view(name).data, {1, n, width}); };
    auto stat = [&](const char* name) { return Tensor(scratch_.view(name).data, {1, n}); };
    DecodeRows r;
    r.norm = S("norm", c.d_model);
    if (c.norm == NormKind::kLayerNorm) r.mean = stat("mean");
    r.rstd = stat("rstd");
    if (c.qk_norm) {
        r.qkv_raw = S("qkv_raw", c.qkv_width());
        r.qk_rstd = S("qk_rstd", c.n_head + c.n_kv_head);
    }
    r.atty = S("atty", c.att_width());
    r.up = S("up", c.up_width());
    r.act = S("act", c.d_ff);
    return r;
}

const float* KvDecoder::run(const int32_t* ids, int n) {
    const BlockConfig& c = model_.block();
    const int64_t C = c.d_model;
    const int t0 = position();
    const Arena& P = model_.base().params();
    const Transformer::Weights& w = model_.weights();
    auto W = [&](ParamId id) { return P.view(id); };
    auto S = [&](const char* name) { return Tensor(scratch_.view(name).data, {1, n, C}); };
    const DecodeRows r = rows(n);
    const Tensor inp(const_cast<int32_t*>(ids), {1, n}, DType::kI32);
    Tensor x = S("x");
    const Tensor mid = S("res_mid"), out = S("res_out");
    const Tensor norm_row(scratch_.view("norm").data, {1, 1, C});
    // Everything but the LM head on the threads the layers' largest GEMM (the MLP's first) pays for: one
    // for a decode step at small d_model; the head chooses its own (kernels/ops.h).
    {
        const kernels::CpuThreadsForWork layer_threads(2.0 * n * C * static_cast<double>(c.up_width()));
        Tensor positions;  // learned positions t0.. use rows t0.. of the table
        if (!c.rope) {
            const Tensor wpe = W(w.positions);
            positions = Tensor(static_cast<float*>(wpe.data) + static_cast<int64_t>(t0) * C,
                               {model_.dims().block_size - t0, C});
        }
        kernels::encoder_forward(x, inp, W(w.embed), positions);
        for (int l = 0; l < model_.dims().n_layer; ++l) {
            const LayerParams& L = w.layers[static_cast<size_t>(l)];
            model_.attention().decode(P, L.attn, mid, x, cache_.view(static_cast<size_t>(l)), t0, r, model_.rope());
            model_.mlp().decode(P, L.mlp, out, mid, r);
            x = out;
        }
        // Only the last position's logits are needed: the final norm and the head on one row.
        const Tensor last_row(x.ptr<float>() + static_cast<int64_t>(n - 1) * C, {1, 1, C});
        const NormStats one{c.norm == NormKind::kLayerNorm ? Tensor(scratch_.view("mean").data, {1, 1}) : Tensor(),
                            Tensor(scratch_.view("rstd").data, {1, 1})};
        norm_forward(c.norm, norm_row, one, last_row, W(w.norm.w),
                     c.norm == NormKind::kLayerNorm ? W(w.norm.b) : Tensor(), c.norm_eps);
    }
    const Tensor logits(scratch_.view("logits").data, {1, 1, model_.dims().padded_vocab});
    kernels::matmul_forward(logits, norm_row, W(w.head), Tensor());
    return logits.ptr<float>();
}

}  // namespace llmt::models
