// Gpt2Decoder: the same op sequence as Gpt2::forward (models/gpt2.cpp), on the n new positions only,
// with attention over the cached qkv rows of every earlier position.
#include "models/gpt2_decode.h"

#include <fmt/format.h>

#include "core/check.h"
#include "core/error.h"
#include "kernels/ops.h"

namespace llmt::models {

Gpt2Decoder::Gpt2Decoder(const Gpt2& model, int max_T) : Decoder(model, max_T), model_(model) {
    const Gpt2Config& c = model.config();
    const int64_t T = capacity(), C = c.d_model, F = c.d_ff;
    for (int l = 0; l < c.n_layer; ++l) cache_.add(fmt::format("h{}.qkv", l), {1, T, 3 * C});
    cache_.allocate(false);  // rows are written before they are read (positions < position() only)
    for (const char* n : {"x", "ln", "atty", "proj", "res2", "res3"}) scratch_.add(n, {T * C});
    for (const char* n : {"fch", "fch_gelu"}) scratch_.add(n, {T * F});
    scratch_.add("mean", {T});
    scratch_.add("rstd", {T});
    scratch_.add("logits", {c.padded_vocab});
    scratch_.allocate(false);
}

const float* Gpt2Decoder::run(const int32_t* ids, int n) {
    const Gpt2Config& c = model_.config();
    const int64_t C = c.d_model, F = c.d_ff, Vp = c.padded_vocab;
    const int t0 = position();
    const Arena& P = model_.base().params();
    const Gpt2::Weights& w = model_.weights();
    auto W = [&](ParamId id) { return P.view(id); };
    auto S = [&](const char* name, int64_t width) { return Tensor(scratch_.view(name).data, {1, n, width}); };
    Tensor mean(scratch_.view("mean").data, {1, n}), rstd(scratch_.view("rstd").data, {1, n});

    // Positions t0.. use rows t0.. of the position table.
    Tensor wpe = W(w.wpe);
    Tensor wpe_from(static_cast<float*>(wpe.data) + static_cast<int64_t>(t0) * C, {c.block_size - t0, C});
    Tensor inp(const_cast<int32_t*>(ids), {1, n}, DType::kI32);
    Tensor residual = S("x", C);
    Tensor ln_row(scratch_.view("ln").data, {1, 1, C});
    // Everything but the LM head on the threads the layers' largest op (c_fc) pays for: one for a decode step
    // at small d_model; the head chooses its own (kernels/ops.h).
    {
        const kernels::CpuThreadsForWork layer_threads(2.0 * n * C * F);
        kernels::encoder_forward(residual, inp, W(w.wte), wpe_from);
        for (int l = 0; l < c.n_layer; ++l) {
            const Gpt2::Layer& L = w.layers[static_cast<size_t>(l)];
            Tensor cache = cache_.view(static_cast<size_t>(l));  // (1, max_T, 3C)
            Tensor qkv_new(static_cast<float*>(cache.data) + static_cast<int64_t>(t0) * 3 * C, {1, n, 3 * C});
            kernels::layernorm_forward(S("ln", C), mean, rstd, residual, W(L.ln1_w), W(L.ln1_b), c.norm_eps);
            kernels::matmul_forward(qkv_new, S("ln", C), W(L.qkv_w), W(L.qkv_b));
            kernels::attention_forward_cached(S("atty", C), cache, t0, c.n_head, c.n_head);
            kernels::matmul_forward(S("proj", C), S("atty", C), W(L.attn_proj_w), W(L.attn_proj_b));
            kernels::residual_forward(S("res2", C), residual, S("proj", C));
            kernels::layernorm_forward(S("ln", C), mean, rstd, S("res2", C), W(L.ln2_w), W(L.ln2_b), c.norm_eps);
            kernels::matmul_forward(S("fch", F), S("ln", C), W(L.fc_w), W(L.fc_b));
            kernels::gelu_forward(S("fch_gelu", F), S("fch", F));
            kernels::matmul_forward(S("proj", C), S("fch_gelu", F), W(L.mlp_proj_w), W(L.mlp_proj_b));
            // res3 is the next layer's input; that layer reads it (ln_1, res2 = res3 + attn) before rewriting it.
            kernels::residual_forward(S("res3", C), S("res2", C), S("proj", C));
            residual = S("res3", C);
        }
        // Only the last position's logits are needed: final LayerNorm and the head on one row.
        const float* last = residual.ptr<float>() + static_cast<int64_t>(n - 1) * C;
        Tensor last_row(const_cast<float*>(last), {1, 1, C});
        Tensor mean1(scratch_.view("mean").data, {1, 1}), rstd1(scratch_.view("rstd").data, {1, 1});
        kernels::layernorm_forward(ln_row, mean1, rstd1, last_row, W(w.lnf_w), W(w.lnf_b), c.norm_eps);
    }
    Tensor logits(scratch_.view("logits").data, {1, 1, Vp});
    kernels::matmul_forward(logits, ln_row, W(w.head), Tensor());
    return logits.ptr<float>();
}

}  // namespace llmt::models
