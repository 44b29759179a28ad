#include "models/llama.h"

#include <fmt/format.h>

#include "config/config.h"
#include "core/check.h"
#include "core/error.h"
#include "kernels/ops.h"
#include "models/llama_decode.h"
#include "models/lm_head.h"

namespace llmt::models {

LlamaConfig LlamaConfig::from(const config::ModelConfig& m) {
    LLMT_CHECK(m.arch == "llama", "model.arch: expected llama, found {}", m.arch);
    LlamaConfig c;
    c.n_layer = m.n_layer;
    c.n_head = m.n_head;
    c.n_kv_head = m.n_kv_head > 0 ? m.n_kv_head : m.n_head;
    c.d_model = m.d_model;
    c.d_ff = m.d_ff;
    c.head_dim = m.head_dim;
    c.block_size = m.block_size;
    c.vocab_size = m.vocab_size;
    c.padded_vocab = m.padded_vocab_size();
    c.tie_embeddings = m.tie_embeddings;
    c.norm_eps = m.norm_eps;
    c.rope_theta = m.rope_theta;
    c.rope_scaling.kind = m.rope_scaling.type;
    c.rope_scaling.factor = m.rope_scaling.factor;
    c.rope_scaling.low_freq_factor = m.rope_scaling.low_freq_factor;
    c.rope_scaling.high_freq_factor = m.rope_scaling.high_freq_factor;
    c.rope_scaling.original_max_position_embeddings = m.rope_scaling.original_max_position_embeddings;
    LLMT_CHECK(m.dropout == 0.f, "model.dropout: llama has no dropout (found {}); set model.dropout: 0", m.dropout);
    return c;
}

double LlamaConfig::flops_per_token(int T) const {
    const double C = d_model, L = n_layer, A = static_cast<double>(n_head) * hd(),
                 KVw = static_cast<double>(n_kv_head) * hd();
    const double per_layer = 2 * C + C * (A + 2 * KVw) + A * C + 3 * C * d_ff;
    const double n = L * per_layer + C + static_cast<double>(vocab_size) * C;  // + the head (V x C)
    return 6 * n + 12 * L * A * T;
}

Llama::Llama(const LlamaConfig& cfg, Device device, DType dtype) : Llama(cfg, device, dtype, LayoutOnly{}) {
    allocate_params();
    const std::vector<float> table = rope_table(cfg_.block_size, cfg_.hd(), cfg_.rope_theta, cfg_.rope_scaling);
    rope_.add("rope", {cfg_.block_size, cfg_.hd()});
    rope_.allocate(false, device);
    kernels::copy(rope(), Tensor(const_cast<float*>(table.data()), {cfg_.block_size, cfg_.hd()}));
}

MemoryPlan Llama::plan_memory(const LlamaConfig& cfg, Device device, DType dtype, int B, int T) {
    return Llama(cfg, device, dtype, LayoutOnly{}).memory_plan(B, T);
}

Llama::Llama(const LlamaConfig& cfg, Device device, DType dtype, LayoutOnly) : cfg_(cfg) {
    LLMT_CHECK(cfg.n_layer > 0 && cfg.n_head > 0 && cfg.n_kv_head > 0 && cfg.d_model > 0 && cfg.d_ff > 0 &&
                   cfg.block_size > 0 && cfg.vocab_size > 0 && cfg.padded_vocab >= cfg.vocab_size,
               "llama: invalid sizes (n_layer {}, n_head {}, n_kv_head {}, d_model {}, d_ff {}, block_size {}, vocab "
               "{}/{})",
               cfg.n_layer, cfg.n_head, cfg.n_kv_head, cfg.d_model, cfg.d_ff, cfg.block_size, cfg.vocab_size,
               cfg.padded_vocab);
    LLMT_CHECK(cfg.n_head % cfg.n_kv_head == 0, "model.n_kv_head: {} must divide model.n_head {}", cfg.n_kv_head,
               cfg.n_head);
    LLMT_CHECK(cfg.head_dim > 0 || cfg.d_model % cfg.n_head == 0,
               "model.d_model: {} is not divisible by model.n_head {} (set model.head_dim)", cfg.d_model, cfg.n_head);
    LLMT_CHECK(cfg.hd() % 2 == 0, "model.head_dim: RoPE needs an even head size, got {}", cfg.hd());
    dims_ = {cfg.n_layer, cfg.d_model, cfg.block_size, cfg.vocab_size, cfg.padded_vocab};
    const int64_t C = cfg.d_model, F = cfg.d_ff, Vp = cfg.padded_vocab, HD = cfg.hd();
    const int64_t Q = cfg.n_head * HD, KV = cfg.n_kv_head * HD;
    auto matrix = [&](std::string name, int64_t rows, int64_t cols, std::vector<HfPart> hf = {}) {
        ParamSpec s = ParamSpec::make(std::move(name), {rows, cols}, ParamInit::kNormal, ParamKind::kWeight);
        s.hf = std::move(hf);
        return store_.add(std::move(s));
    };
    auto norm = [&](std::string name) {
        return store_.add(ParamSpec::make(std::move(name), {C}, ParamInit::kOnes, ParamKind::kNorm));
    };
    auto vocab_table = [&](const std::string& name, ParamKind kind) {
        ParamSpec s = ParamSpec::make(name, {Vp, C}, ParamInit::kNormal, kind);
        s.hf = {{name, cfg.vocab_size}};  // HF has no padding rows
        return store_.add(std::move(s));
    };
    w_.embed = vocab_table("model.embed_tokens.weight", ParamKind::kEmbedding);
    for (int l = 0; l < cfg.n_layer; ++l) {
        const std::string p = fmt::format("model.layers.{}.", l);
        Layer L{};
        L.attn_norm = norm(p + "input_layernorm.weight");
        L.qkv = matrix(p + "self_attn.qkv_proj.weight", Q + 2 * KV, C,
                       {{p + "self_attn.q_proj.weight", Q}, {p + "self_attn.k_proj.weight", KV},
                        {p + "self_attn.v_proj.weight", KV}});
        L.o = matrix(p + "self_attn.o_proj.weight", C, Q);
        L.mlp_norm = norm(p + "post_attention_layernorm.weight");
        L.gate_up = matrix(p + "mlp.gate_up_proj.weight", 2 * F, C,
                           {{p + "mlp.gate_proj.weight", F}, {p + "mlp.up_proj.weight", F}});
        L.down = matrix(p + "mlp.down_proj.weight", C, F);
        w_.layers.push_back(L);
    }
    w_.norm = norm("model.norm.weight");
    w_.head = cfg.tie_embeddings ? w_.embed : vocab_table("lm_head.weight", ParamKind::kWeight);
    layout_params(cfg.lora, device, dtype);
    activation_layout(1, 1, &ids_);
}

std::string Llama::summary() const {
    return fmt::format("llama, {} layers, d_model {}, {} heads ({} kv, head_dim {}), d_ff {}, block {}, vocab {} "
                       "(padded {}), rope theta {:g}{}, {} embeddings, {:.2f}M parameters",
                       cfg_.n_layer, cfg_.d_model, cfg_.n_head, cfg_.n_kv_head, cfg_.hd(), cfg_.d_ff, cfg_.block_size,
                       cfg_.vocab_size, cfg_.padded_vocab, cfg_.rope_theta,
                       cfg_.rope_scaling.kind == "none" ? "" : " (" + cfg_.rope_scaling.kind + " scaling)",
                       cfg_.tie_embeddings ? "tied" : "untied", static_cast<double>(num_parameters()) / 1e6);
}

void Llama::init_base(uint64_t seed) { store_.init_random(seed, 0.02, 0.02); }

bool Llama::kept_per_layer(LayerAct a) const {
    switch (cfg_.recompute) {
        case Recompute::kNone: return true;
        case Recompute::kMlp: return a != kSwiglu;
        case Recompute::kAll: return a == kResOut;  // the next block's input
    }
    return true;
}

Arena Llama::activation_layout(int B, int T, Acts* ids) const {
    const int64_t BT = static_cast<int64_t>(B) * T, C = cfg_.d_model, F = cfg_.d_ff, NH = cfg_.n_head;
    ActLayout a("llama", BT, store_.dtype());
    static const char* const kNames[kNumLayerActs] = {"attn_norm", "attn_rstd", "qkv",     "atty",   "lse",    "res_mid",
                                                      "mlp_norm",  "mlp_rstd",  "gate_up", "swiglu", "res_out"};
    auto add_act = [&](const std::string& key, int i) {
        switch (i) {
            case kAttnRstd: case kMlpRstd: return a.add_f32(key, 1);
            case kLse: return a.add_f32(key, NH);
            case kQkv: return a.add(key, qkv_width());
            case kAtty: return a.add(key, att_width());
            case kGateUp: return a.add(key, 2 * F);
            case kSwiglu: return a.add(key, F);
            default: return a.add(key, C);
        }
    };
    Acts h;
    h.embedded = a.add("embedded", C);
    h.layer.resize(static_cast<size_t>(cfg_.n_layer));
    for (int l = 0; l < cfg_.n_layer; ++l)
        for (int i = 0; i < kNumLayerActs; ++i)
            if (kept_per_layer(LayerAct(i))) h.layer[l][i] = add_act(fmt::format("h{}.{}", l, kNames[i]), i);
    for (int i = 0; i < kNumLayerActs; ++i)
        if (!kept_per_layer(LayerAct(i))) {
            const ActId shared = add_act(std::string("blk.") + kNames[i], i);
            for (auto& layer : h.layer) layer[i] = shared;
        }
    h.norm = a.add("norm", C);
    h.norm_rstd = a.add_f32("norm_rstd", 1);
    h.logits = a.add_fixed("logits", lm_head_chunk_rows(BT, cfg_.padded_vocab) * cfg_.padded_vocab);
    h.losses = a.add_f32("losses", 1);
    // Backward scratch shared by every layer; d_c first holds the head's gradient w.r.t. the final norm.
    h.d_residual = a.add("d_residual", C);
    h.d_c = a.add("d_c", C);
    h.d_qkv = a.add("d_qkv", qkv_width());
    h.d_att = a.add("d_att", att_width());
    h.d_f = a.add("d_f", F);
    h.d_gu = a.add("d_gu", 2 * F);
    h.inputs = a.add_i32("inputs", 1);
    h.targets = a.add_i32("targets", 1);
    h.positions = a.add_i32("positions", 1);
    if (ids) *ids = h;
    return a.take();
}

void Llama::block_forward(int l, Tensor residual, bool to_res_out) {
    const int64_t C = cfg_.d_model, F = cfg_.d_ff, NH = cfg_.n_head, KV = cfg_.n_kv_head;
    const Layer& L = w_.layers[static_cast<size_t>(l)];
    auto W = [&](ParamId id) { return store_.weight(id); };
    const int64_t QKV = qkv_width(), A = att_width();
    // Attention: h = x + o(attn(rope(qkv(rmsnorm(x))))).
    kernels::rmsnorm_forward(act(l, kAttnNorm, C), stat(l, kAttnRstd), residual, W(L.attn_norm), cfg_.norm_eps);
    linear_forward(act(l, kQkv, QKV), act(l, kAttnNorm, C), L.qkv);
    kernels::rope_forward(act(l, kQkv, QKV), rope(), static_cast<int>(NH), static_cast<int>(KV), 0, positions_);
    kernels::attention_forward(act(l, kAtty, A), acts_.shaped(ids_.layer[l][kLse], {B_, NH, T_}), act(l, kQkv, QKV),
                               static_cast<int>(NH), static_cast<int>(KV), positions_);
    linear_forward(act(l, kResMid, C), act(l, kAtty, A), L.o, Tensor(), residual);
    // MLP: out = h + down(silu(gate(rmsnorm(h))) * up(rmsnorm(h))).
    kernels::rmsnorm_forward(act(l, kMlpNorm, C), stat(l, kMlpRstd), act(l, kResMid, C), W(L.mlp_norm), cfg_.norm_eps);
    linear_forward(act(l, kGateUp, 2 * F), act(l, kMlpNorm, C), L.gate_up);
    kernels::swiglu_forward(act(l, kSwiglu, F), act(l, kGateUp, 2 * F));
    if (!to_res_out) return;
    linear_forward(act(l, kResOut, C), act(l, kSwiglu, F), L.down, Tensor(), act(l, kResMid, C));
}

float Llama::forward(const int32_t* inputs, const int32_t* targets, int B, int T, bool train, float loss_scale,
                     const int32_t* positions) {
    const Batch batch = begin_forward(
        acts_, [this](int b, int t) { return activation_layout(b, t); }, inputs, targets, B, T, train, positions);
    positions_ = batch.positions;
    const int64_t C = cfg_.d_model, BT = static_cast<int64_t>(B) * T;
    auto W = [&](ParamId id) { return store_.weight(id); };
    Tensor residual = acts_.btc(ids_.embedded, B, T, C);
    kernels::encoder_forward(residual, acts_.bt(ids_.inputs, B, T), W(w_.embed), Tensor());
    for (int l = 0; l < cfg_.n_layer; ++l) {
        block_forward(l, residual, /*to_res_out=*/true);
        residual = act(l, kResOut, C);
    }
    kernels::rmsnorm_forward(acts_.btc(ids_.norm, B, T, C), acts_.bt(ids_.norm_rstd, B, T), residual, W(w_.norm),
                             cfg_.norm_eps);
    // The head's backward runs in the forward, chunk by chunk, leaving d norm in d_c for backward().
    const HeadBuffers buf{acts_.shaped(ids_.logits, {lm_head_chunk_rows(BT, cfg_.padded_vocab), cfg_.padded_vocab}),
                          acts_.shaped(ids_.losses, {BT}), acts_.shaped(ids_.targets, {BT}),
                          acts_.shaped(ids_.d_c, {BT, C})};
    has_grad_ = train;
    return head_forward(batch, targets, acts_.shaped(ids_.norm, {BT, C}), w_.head, buf, train, loss_scale);
}

void Llama::backward() {
    LLMT_INTERNAL_CHECK(has_grad_, "llama backward: call forward(..., train = true) first");
    const int B = B_, T = T_;
    const int64_t C = cfg_.d_model, F = cfg_.d_ff, NH = cfg_.n_head, KV = cfg_.n_kv_head;
    const int64_t QKV = qkv_width(), A = att_width();
    auto W = [&](ParamId id) { return store_.weight(id); };
    auto G = [&](ParamId id) { return grad_or_sink(id); };  // norms: a frozen base's go to a sink
    Tensor dres = acts_.btc(ids_.d_residual, B, T, C), dc = acts_.btc(ids_.d_c, B, T, C);
    Tensor dqkv = acts_.btc(ids_.d_qkv, B, T, QKV), datt = acts_.btc(ids_.d_att, B, T, A);
    Tensor df = acts_.btc(ids_.d_f, B, T, F), dgu = acts_.btc(ids_.d_gu, B, T, 2 * F);

    // dc holds d norm (the forward ran the head's backward); the residual stream accumulates (+=).
    kernels::zero(dres);
    kernels::rmsnorm_backward(dres, G(w_.norm), dc, act(cfg_.n_layer - 1, kResOut, C), W(w_.norm),
                              acts_.bt(ids_.norm_rstd, B, T));
    grads_ready_from(w_.norm);
    for (int l = cfg_.n_layer - 1; l >= 0; --l) {
        const Layer& L = w_.layers[static_cast<size_t>(l)];
        Tensor residual = l == 0 ? acts_.btc(ids_.embedded, B, T, C) : act(l - 1, kResOut, C);
        // trainer.recompute: the same kernels on the same inputs as the forward, bit for bit.
        if (cfg_.recompute == Recompute::kAll) block_forward(l, residual, /*to_res_out=*/false);
        if (cfg_.recompute == Recompute::kMlp) kernels::swiglu_forward(act(l, kSwiglu, F), act(l, kGateUp, 2 * F));
        // dres = d res_out = d down's output = d res_mid's share through the skip.
        linear_backward(df, dres, act(l, kSwiglu, F), L.down);
        kernels::swiglu_backward(dgu, df, act(l, kGateUp, 2 * F));
        linear_backward(dc, dgu, act(l, kMlpNorm, C), L.gate_up);
        kernels::rmsnorm_backward(dres, G(L.mlp_norm), dc, act(l, kResMid, C), W(L.mlp_norm), stat(l, kMlpRstd));
        // dres = d res_mid = d o's output = d residual's share through the skip.
        linear_backward(datt, dres, act(l, kAtty, A), L.o);
        kernels::attention_backward(dqkv, datt, act(l, kQkv, QKV), act(l, kAtty, A),
                                    acts_.shaped(ids_.layer[l][kLse], {B, NH, T}), static_cast<int>(NH),
                                    static_cast<int>(KV), Tensor(), positions_);
        // Gradients w.r.t. the rotated q, k back to the projection's outputs.
        kernels::rope_backward(dqkv, rope(), static_cast<int>(NH), static_cast<int>(KV), positions_);
        linear_backward(dc, dqkv, act(l, kAttnNorm, C), L.qkv);
        kernels::rmsnorm_backward(dres, G(L.attn_norm), dc, residual, W(L.attn_norm), stat(l, kAttnRstd));
        grads_ready_from(L.attn_norm);
    }
    if (!store_.frozen()) kernels::encoder_backward(G(w_.embed), Tensor(), dres, acts_.bt(ids_.inputs, B, T));
    grads_ready_all();
    has_grad_ = false;
}

MemoryPlan Llama::memory_plan(int B, int T) const {
    const size_t rope_bytes = static_cast<size_t>(cfg_.block_size) * cfg_.hd() * sizeof(float);
    MemoryPlan m = params_memory_plan(B, T);
    m.activations += activation_layout(B, T).nbytes() + rope_bytes;
    return m;
}

std::unique_ptr<Decoder> Llama::decoder(int max_T) const { return std::make_unique<LlamaDecoder>(*this, max_T); }

std::string Llama::hf_canonical_name(const std::string& n) const {
    if (n.find("rotary_emb.inv_freq") != std::string::npos) return "";
    if (n == "lm_head.weight") return cfg_.tie_embeddings ? "" : n;
    return n;
}

}  // namespace llmt::models
