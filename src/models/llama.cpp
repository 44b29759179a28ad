#include "models/llama.h"

#include <fmt/format.h>

#include "config/config.h"
#include "core/check.h"
#include "core/error.h"
#include "kernels/attention_scratch.h"
#include "kernels/ops.h"
#include "models/arch.h"
#include "models/hf_config.h"
#include "models/hf_fields.h"
#include "models/hf_llama_config.h"
#include "models/llama_decode.h"
#include "models/registry.h"
#include "models/lm_head.h"

namespace llmt::models {

LlamaConfig LlamaConfig::from(const config::ModelConfig& m) {
    LlamaConfig c;
    c.arch = m.arch;
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
    c.sliding_window = m.sliding_window;
    c.rope_theta = m.rope_theta;
    c.rope_scaling.kind = m.rope_scaling.type;
    c.rope_scaling.factor = m.rope_scaling.factor;
    c.rope_scaling.low_freq_factor = m.rope_scaling.low_freq_factor;
    c.rope_scaling.high_freq_factor = m.rope_scaling.high_freq_factor;
    c.rope_scaling.original_max_position_embeddings = m.rope_scaling.original_max_position_embeddings;
    LLMT_CHECK(m.dropout == 0.f, "model.dropout: {} has no dropout (found {}); set model.dropout: 0", m.arch,
               m.dropout);
    return c;
}

double LlamaConfig::flops_per_token(int T) const {
    const double C = d_model, L = n_layer, A = static_cast<double>(n_head) * hd(),
                 KVw = static_cast<double>(n_kv_head) * hd();
    const double per_layer = 2 * C + C * (A + 2 * KVw) + (qkv_bias ? A + 2 * KVw : 0) + (qk_norm ? 2 * hd() : 0) +
                             A * C + 3 * C * d_ff;
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
        if (cfg.qkv_bias) {
            ParamSpec b = ParamSpec::make(p + "self_attn.qkv_proj.bias", {Q + 2 * KV}, ParamInit::kZeros, ParamKind::kBias);
            b.hf = {{p + "self_attn.q_proj.bias", Q}, {p + "self_attn.k_proj.bias", KV}, {p + "self_attn.v_proj.bias", KV}};
            L.qkv_bias = store_.add(std::move(b));
        }
        if (cfg.qk_norm) {
            L.q_norm = store_.add(ParamSpec::make(p + "self_attn.q_norm.weight", {HD}, ParamInit::kOnes, ParamKind::kNorm));
            L.k_norm = store_.add(ParamSpec::make(p + "self_attn.k_norm.weight", {HD}, ParamInit::kOnes, ParamKind::kNorm));
        }
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
    return fmt::format("{}, {} layers, d_model {}, {} heads ({} kv, head_dim {}{}), d_ff {}, block {}, vocab {} "
                       "(padded {}), rope theta {:g}{}{}, {} embeddings, {:.2f}M parameters",
                       cfg_.arch, cfg_.n_layer, cfg_.d_model, cfg_.n_head, cfg_.n_kv_head, cfg_.hd(), cfg_.qkv_bias ? ", q/k/v bias" : cfg_.qk_norm ? ", q/k norm" : "", cfg_.d_ff, cfg_.block_size,
                       cfg_.vocab_size, cfg_.padded_vocab, cfg_.rope_theta,
                       cfg_.rope_scaling.kind == "none" ? "" : " (" + cfg_.rope_scaling.kind + " scaling)",
                       cfg_.sliding_window > 0 ? fmt::format(", sliding window {}", cfg_.sliding_window) : "",
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
    static const char* const kNames[kNumLayerActs] = {"attn_norm", "attn_rstd", "qkv",     "atty",    "lse",
                                                      "res_mid",   "mlp_norm",  "mlp_rstd", "gate_up", "swiglu",
                                                      "res_out",   "qkv_raw",   "qk_rstd"};
    // The per-head norms' buffers exist only with them (LLaMA's layout is the one it always was).
    auto used = [&](int i) { return cfg_.qk_norm || (i != kQkvRaw && i != kQkRstd); };
    auto add_act = [&](const std::string& key, int i) {
        switch (i) {
            case kAttnRstd: case kMlpRstd: return a.add_f32(key, 1);
            case kLse: return a.add_f32(key, NH);
            case kQkRstd: return a.add_f32(key, NH + cfg_.n_kv_head);
            case kQkv: case kQkvRaw: return a.add(key, qkv_width());
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
            if (used(i) && kept_per_layer(LayerAct(i))) h.layer[l][i] = add_act(fmt::format("h{}.{}", l, kNames[i]), i);
    for (int i = 0; i < kNumLayerActs; ++i)
        if (used(i) && !kept_per_layer(LayerAct(i))) {
            const ActId shared = add_act(std::string("blk.") + kNames[i], i);
            for (auto& layer : h.layer) layer[i] = shared;
        }
    h.norm = a.add("norm", C);
    h.norm_rstd = a.add_f32("norm_rstd", 1);
    h.logits = add_lm_head_logits(a, cfg_.padded_vocab);  // after the per-row buffers: its budget
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
    if (cfg_.qk_norm) {  // Qwen3: each q and k head RMS-normalised before RoPE
        linear_forward(act(l, kQkvRaw, QKV), act(l, kAttnNorm, C), L.qkv, qkv_bias(L));
        kernels::head_rmsnorm_forward(act(l, kQkv, QKV), qk_rstd(l), act(l, kQkvRaw, QKV), W(L.q_norm), W(L.k_norm),
                                      static_cast<int>(NH), static_cast<int>(KV), cfg_.norm_eps);
    } else {
        linear_forward(act(l, kQkv, QKV), act(l, kAttnNorm, C), L.qkv, qkv_bias(L));
    }
    kernels::rope_forward(act(l, kQkv, QKV), rope(), static_cast<int>(NH), static_cast<int>(KV), 0, positions_);
    kernels::attention_forward(act(l, kAtty, A), acts_.shaped(ids_.layer[l][kLse], {B_, NH, T_}), act(l, kQkv, QKV),
                               static_cast<int>(NH), static_cast<int>(KV), positions_, cfg_.sliding_window);
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
    const HeadBuffers buf{lm_head_scratch(acts_, ids_.logits, cfg_.padded_vocab),
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
                                    static_cast<int>(KV), Tensor(), positions_, cfg_.sliding_window);
        // Gradients w.r.t. the rotated q, k back to the projection's outputs.
        kernels::rope_backward(dqkv, rope(), static_cast<int>(NH), static_cast<int>(KV), positions_);
        if (cfg_.qk_norm)  // in place: d normed q/k -> d projection output
            kernels::head_rmsnorm_backward(dqkv, grad_or_sink(L.q_norm, 0), grad_or_sink(L.k_norm, 1), dqkv,
                                           act(l, kQkvRaw, QKV), W(L.q_norm), W(L.k_norm), qk_rstd(l),
                                           static_cast<int>(NH), static_cast<int>(KV));
        linear_backward(dc, dqkv, act(l, kAttnNorm, C), L.qkv, cfg_.qkv_bias ? G(L.qkv_bias) : Tensor());
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
    m.activations += activation_layout(B, T).nbytes() + rope_bytes +
                     kernels::attention_backward_scratch_bytes(store_.device(), B, T, att_width(), cfg_.n_head,
                                                               cfg_.n_kv_head, cfg_.hd());
    return m;
}

std::unique_ptr<Decoder> Llama::decoder(int max_T) const { return std::make_unique<LlamaDecoder>(*this, max_T); }

std::string Llama::hf_canonical_name(const std::string& n) const {
    if (n.find("rotary_emb.inv_freq") != std::string::npos) return "";
    if (n == "lm_head.weight") return cfg_.tie_embeddings ? "" : n;
    return n;
}

// ---- The family (models/arch.h): LlamaForCausalLM's config.json and how a config builds the model. ----

namespace {

void read_llama_config(const nlohmann::json& j, const std::string& path, HfConfig& c) {
    read_hf_llama_shape(j, path, c);
    const HfFields f(j, path);
    f.refuse_unless(!f.bool_or("attention_bias", false), "attention_bias", "llmtrain's LLaMA has no biases");
}

void write_llama_config(const config::ModelConfig& m, const HfExportInfo&, int max_pos, nlohmann::json& j) {
    write_hf_llama_shape(m, max_pos, j);
    j["attention_bias"] = false;
    j["mlp_bias"] = false;
    j["pretraining_tp"] = 1;
}

}  // namespace

LlamaConfig llama_graph_config(const config::Config& cfg) {
    LlamaConfig c = LlamaConfig::from(cfg.model);
    c.recompute = recompute_from_name(cfg.trainer.recompute);
    c.lora = lora_spec(cfg);
    return c;
}

ArchSpec llama_graph_spec(const std::string& name, const std::function<void(LlamaConfig&)>& variant) {
    ArchSpec s;
    s.entry = config::find_arch(name);
    LLMT_ASSERT(s.entry != nullptr);
    s.model_types = {name};
    s.needs_config_json = true;  // RoPE and the norms' eps are not in the weights
    auto config_of = [variant](const config::Config& cfg) {
        LlamaConfig c = llama_graph_config(cfg);
        variant(c);
        return c;
    };
    s.make = [config_of](const config::Config& cfg, Device device, DType dtype) -> std::unique_ptr<Model> {
        return std::make_unique<Llama>(config_of(cfg), device, dtype);
    };
    s.plan_memory = [config_of](const config::Config& cfg, Device device, DType dtype, int B, int T) {
        return Llama::plan_memory(config_of(cfg), device, dtype, B, T);
    };
    s.flops_per_token = [variant](const config::ModelConfig& m, int T) {
        LlamaConfig c = LlamaConfig::from(m);
        variant(c);
        return c.flops_per_token(T);
    };
    s.lora_targets = {"q_proj", "v_proj"};  // PEFT's default for the LLaMA-shaped families
    return s;
}

const ArchSpec& llama_arch() {
    static const ArchSpec spec = [] {
        ArchSpec s = llama_graph_spec("llama", [](LlamaConfig&) {});
        s.hf_class = "LlamaForCausalLM";
        s.read_hf_config = read_llama_config;
        s.write_hf_config = write_llama_config;
        return s;
    }();
    return spec;
}

}  // namespace llmt::models
