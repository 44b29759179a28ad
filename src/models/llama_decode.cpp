#include "models/llama_decode.h"

#include <fmt/format.h>

#include "core/check.h"
#include "core/error.h"
#include "kernels/ops.h"

namespace llmt::models {

LlamaDecoder::LlamaDecoder(const Llama& model, int max_T) : Decoder(model, max_T), model_(model) {
    const LlamaConfig& c = model.config();
    const int64_t T = capacity(), C = c.d_model, F = c.d_ff, HD = c.hd();
    const int64_t QKV = static_cast<int64_t>(c.n_head + 2 * c.n_kv_head) * HD, A = c.n_head * HD;
    for (int l = 0; l < c.n_layer; ++l) cache_.add(fmt::format("h{}.qkv", l), {1, T, QKV});
    cache_.allocate(false);  // rows are written before they are read (positions < position() only)
    for (const char* n : {"x", "norm", "res_mid", "res_out"}) scratch_.add(n, {T * C});
    scratch_.add("atty", {T * A});
    scratch_.add("gate_up", {T * 2 * F});
    scratch_.add("swiglu", {T * F});
    scratch_.add("rstd", {T});
    if (c.qk_norm) {  // the projection's output before the per-head norms, and their statistics
        scratch_.add("qkv_raw", {T * QKV});
        scratch_.add("qk_rstd", {T * (c.n_head + c.n_kv_head)});
    }
    scratch_.add("logits", {c.padded_vocab});
    scratch_.allocate(false);
}

const float* LlamaDecoder::run(const int32_t* ids, int n) {
    const LlamaConfig& c = model_.config();
    const int64_t C = c.d_model, F = c.d_ff, HD = c.hd(), Vp = c.padded_vocab;
    const int NH = c.n_head, KV = c.n_kv_head;
    const int64_t QKV = static_cast<int64_t>(NH + 2 * KV) * HD, A = NH * HD;
    const int t0 = position();
    const Arena& P = model_.base().params();
    const Llama::Weights& w = model_.weights();
    auto W = [&](ParamId id) { return P.view(id); };
    auto S = [&](const char* name, int64_t width) { return Tensor(scratch_.view(name).data, {1, n, width}); };
    Tensor rstd(scratch_.view("rstd").data, {1, n});

    Tensor inp(const_cast<int32_t*>(ids), {1, n}, DType::kI32);
    Tensor residual = S("x", C);
    Tensor norm_row(scratch_.view("norm").data, {1, 1, C});
    // Everything but the LM head on the threads the layers' largest op (gate_up) pays for, as Gpt2Decoder does;
    // the head chooses its own (kernels/ops.h).
    {
        const kernels::CpuThreadsForWork layer_threads(2.0 * n * C * 2 * F);
        kernels::encoder_forward(residual, inp, W(w.embed), Tensor());
        for (int l = 0; l < c.n_layer; ++l) {
            const Llama::Layer& L = w.layers[static_cast<size_t>(l)];
            Tensor cache = cache_.view(static_cast<size_t>(l));  // (1, max_T, QKV)
            Tensor qkv_new(static_cast<float*>(cache.data) + static_cast<int64_t>(t0) * QKV, {1, n, QKV});
            kernels::rmsnorm_forward(S("norm", C), rstd, residual, W(L.attn_norm), c.norm_eps);
            if (c.qk_norm) {
                kernels::matmul_forward(S("qkv_raw", QKV), S("norm", C), W(L.qkv), c.qkv_bias ? W(L.qkv_bias) : Tensor());
                kernels::head_rmsnorm_forward(qkv_new, Tensor(scratch_.view("qk_rstd").data, {1, n, NH + KV}),
                                              S("qkv_raw", QKV), W(L.q_norm), W(L.k_norm), NH, KV, c.norm_eps);
            } else {
                kernels::matmul_forward(qkv_new, S("norm", C), W(L.qkv), c.qkv_bias ? W(L.qkv_bias) : Tensor());
            }
            kernels::rope_forward(qkv_new, model_.rope(), NH, KV, t0);  // positions t0..t0+n-1
            kernels::attention_forward_cached(S("atty", A), cache, t0, NH, KV, c.sliding_window);
            kernels::matmul_forward(S("res_mid", C), S("atty", A), W(L.o), Tensor(), residual);
            kernels::rmsnorm_forward(S("norm", C), rstd, S("res_mid", C), W(L.mlp_norm), c.norm_eps);
            kernels::matmul_forward(S("gate_up", 2 * F), S("norm", C), W(L.gate_up), Tensor());
            kernels::swiglu_forward(S("swiglu", F), S("gate_up", 2 * F));
            // res_out is the next layer's input: it reads it (norm, o_proj's add into res_mid) before its own
            // down projection rewrites it.
            kernels::matmul_forward(S("res_out", C), S("swiglu", F), W(L.down), Tensor(), S("res_mid", C));
            residual = S("res_out", C);
        }
        // Only the last position's logits are needed: the final norm and the head on one row.
        Tensor last_row(residual.ptr<float>() + static_cast<int64_t>(n - 1) * C, {1, 1, C});
        kernels::rmsnorm_forward(norm_row, Tensor(scratch_.view("rstd").data, {1, 1}), last_row, W(w.norm),
                                 c.norm_eps);
    }
    Tensor logits(scratch_.view("logits").data, {1, 1, Vp});
    kernels::matmul_forward(logits, norm_row, W(w.head), Tensor());
    return logits.ptr<float>();
}

}  // namespace llmt::models
