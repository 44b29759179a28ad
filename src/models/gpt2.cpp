#include "models/gpt2.h"

#include <fmt/format.h>

#include <cmath>

#include "config/config.h"
#include "core/check.h"
#include "core/error.h"
#include "kernels/attention_scratch.h"
#include "kernels/ops.h"
#include "models/arch.h"
#include "models/gpt2_decode.h"
#include "models/hf_config.h"
#include "models/hf_fields.h"
#include "models/registry.h"
#include "models/lm_head.h"

namespace llmt::models {

Gpt2Config Gpt2Config::from(const config::ModelConfig& m) {
    LLMT_CHECK(m.arch == "gpt2", "model.arch: expected gpt2, found {}", m.arch);
    Gpt2Config c;
    c.n_layer = m.n_layer;
    c.n_head = m.n_head;
    c.d_model = m.d_model;
    c.d_ff = m.d_ff;
    c.block_size = m.block_size;
    c.vocab_size = m.vocab_size;
    c.padded_vocab = m.padded_vocab_size();
    c.tie_embeddings = m.tie_embeddings;
    c.norm_eps = m.norm_eps;
    c.dropout = m.dropout;
    return c;
}

double Gpt2Config::flops_per_token(int T) const {
    double C = d_model, L = n_layer;
    double n = static_cast<double>(vocab_size) * C + static_cast<double>(block_size) * C +
               L * (4 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * (C * d_ff) + d_ff + C) + 2 * C;
    if (!tie_embeddings) n += static_cast<double>(vocab_size) * C;
    return 6 * n + 12 * L * C * T;
}

Gpt2::Gpt2(const Gpt2Config& cfg, Device device, DType dtype) : Gpt2(cfg, device, dtype, LayoutOnly{}) {
    allocate_params();
}

MemoryPlan Gpt2::plan_memory(const Gpt2Config& cfg, Device device, DType dtype, int B, int T) {
    return Gpt2(cfg, device, dtype, LayoutOnly{}).memory_plan(B, T);
}

Gpt2::Gpt2(const Gpt2Config& cfg, Device device, DType dtype, LayoutOnly) : cfg_(cfg) {
    LLMT_CHECK(cfg.n_layer > 0 && cfg.n_head > 0 && cfg.d_model > 0 && cfg.d_ff > 0 && cfg.block_size > 0 &&
                   cfg.vocab_size > 0 && cfg.padded_vocab >= cfg.vocab_size,
               "gpt2: invalid sizes (n_layer {}, n_head {}, d_model {}, d_ff {}, block_size {}, vocab {}/{})",
               cfg.n_layer, cfg.n_head, cfg.d_model, cfg.d_ff, cfg.block_size, cfg.vocab_size, cfg.padded_vocab);
    LLMT_CHECK(cfg.dropout >= 0.f && cfg.dropout < 1.f, "gpt2: dropout {} outside [0, 1)", cfg.dropout);
    LLMT_CHECK(cfg.d_model % cfg.n_head == 0, "gpt2: d_model {} not divisible by n_head {}", cfg.d_model,
               cfg.n_head);
    dims_ = {cfg.n_layer, cfg.d_model, cfg.block_size, cfg.vocab_size, cfg.padded_vocab};
    const int64_t C = cfg.d_model, F = cfg.d_ff, Vp = cfg.padded_vocab;
    // The table: HF names, our (out, in) layout; HF keeps Conv1D weights (in, out) and wte without padding.
    auto add = [&](std::string name, std::vector<int64_t> shape, ParamInit init, ParamKind kind, bool transposed) {
        ParamSpec s = ParamSpec::make(std::move(name), std::move(shape), init, kind);
        s.hf_transposed = transposed;
        return store_.add(std::move(s));
    };
    auto add_vocab_table = [&](std::string name, ParamKind kind) {
        ParamSpec s = ParamSpec::make(name, {Vp, C}, ParamInit::kNormal, kind);
        s.hf = {{name, cfg.vocab_size}};
        return store_.add(std::move(s));
    };
    w_.wte = add_vocab_table("transformer.wte.weight", ParamKind::kEmbedding);
    {
        ParamSpec wpe = ParamSpec::make("transformer.wpe.weight", {cfg.block_size, C}, ParamInit::kNormal, ParamKind::kEmbedding);
        wpe.hf_crop_rows = true;  // a model trained with a longer context keeps its first block_size positions
        w_.wpe = store_.add(std::move(wpe));
    }
    for (int l = 0; l < cfg.n_layer; ++l) {
        const std::string p = fmt::format("transformer.h.{}.", l);
        Layer L{};
        L.ln1_w = add(p + "ln_1.weight", {C}, ParamInit::kOnes, ParamKind::kNorm, false);
        L.ln1_b = add(p + "ln_1.bias", {C}, ParamInit::kZeros, ParamKind::kNorm, false);
        L.qkv_w = add(p + "attn.c_attn.weight", {3 * C, C}, ParamInit::kNormal, ParamKind::kWeight, true);
        L.qkv_b = add(p + "attn.c_attn.bias", {3 * C}, ParamInit::kZeros, ParamKind::kBias, false);
        L.attn_proj_w = add(p + "attn.c_proj.weight", {C, C}, ParamInit::kNormalResidual, ParamKind::kWeight, true);
        L.attn_proj_b = add(p + "attn.c_proj.bias", {C}, ParamInit::kZeros, ParamKind::kBias, false);
        L.ln2_w = add(p + "ln_2.weight", {C}, ParamInit::kOnes, ParamKind::kNorm, false);
        L.ln2_b = add(p + "ln_2.bias", {C}, ParamInit::kZeros, ParamKind::kNorm, false);
        L.fc_w = add(p + "mlp.c_fc.weight", {F, C}, ParamInit::kNormal, ParamKind::kWeight, true);
        L.fc_b = add(p + "mlp.c_fc.bias", {F}, ParamInit::kZeros, ParamKind::kBias, false);
        L.mlp_proj_w = add(p + "mlp.c_proj.weight", {C, F}, ParamInit::kNormalResidual, ParamKind::kWeight, true);
        L.mlp_proj_b = add(p + "mlp.c_proj.bias", {C}, ParamInit::kZeros, ParamKind::kBias, false);
        w_.layers.push_back(L);
    }
    w_.lnf_w = add("transformer.ln_f.weight", {C}, ParamInit::kOnes, ParamKind::kNorm, false);
    w_.lnf_b = add("transformer.ln_f.bias", {C}, ParamInit::kZeros, ParamKind::kNorm, false);
    w_.head = cfg.tie_embeddings ? w_.wte : add_vocab_table("lm_head.weight", ParamKind::kWeight);
    layout_params(cfg.lora, device, dtype);
    activation_layout(1, 1, &ids_);  // the handles (the same for every (B, T))
}

std::string Gpt2::summary() const {
    return fmt::format("gpt2, {} layers, d_model {}, {} heads, block {}, vocab {} (padded {}), {:.2f}M parameters",
                       cfg_.n_layer, cfg_.d_model, cfg_.n_head, cfg_.block_size, cfg_.vocab_size, cfg_.padded_vocab,
                       static_cast<double>(num_parameters()) / 1e6);
}

void Gpt2::init_base(uint64_t seed) { store_.init_random(seed, 0.02, 0.02 / std::sqrt(2.0 * cfg_.n_layer)); }

bool Gpt2::kept_per_layer(LayerAct a) const {
    switch (cfg_.recompute) {
        case Recompute::kNone: return true;
        case Recompute::kMlp: return a != kFchGelu;
        case Recompute::kAll: return a == kResidual3;  // the next block's input
    }
    return true;
}

bool Gpt2::present(LayerAct a) const { return !((a == kAttProj || a == kFcProj) && cfg_.dropout <= 0.f); }

Arena Gpt2::activation_layout(int B, int T, Acts* ids) const {
    const int64_t BT = static_cast<int64_t>(B) * T, C = cfg_.d_model, F = cfg_.d_ff, NH = cfg_.n_head;
    ActLayout a("gpt2", BT, store_.dtype());
    static const char* const kNames[kNumLayerActs] = {"ln1", "ln1_mean", "ln1_rstd", "qkv", "atty", "lse", "attproj",
                                                      "residual2", "ln2", "ln2_mean", "ln2_rstd", "fch", "fch_gelu",
                                                      "fcproj", "residual3"};
    // Activations (and their gradients) in the compute dtype; statistics in fp32.
    auto add_act = [&](const std::string& key, int i) {
        switch (i) {
            case kLn1Mean: case kLn1Rstd: case kLn2Mean: case kLn2Rstd: return a.add_f32(key, 1);
            case kLse: return a.add_f32(key, NH);
            case kQkv: return a.add(key, 3 * C);
            case kFch: case kFchGelu: return a.add(key, F);
            default: return a.add(key, C);
        }
    };
    Acts h;
    h.encoded = a.add("encoded", C);
    h.layer.resize(static_cast<size_t>(cfg_.n_layer));
    for (int l = 0; l < cfg_.n_layer; ++l)
        for (int i = 0; i < kNumLayerActs; ++i)
            if (present(LayerAct(i)) && kept_per_layer(LayerAct(i)))
                h.layer[l][i] = add_act(fmt::format("h{}.{}", l, kNames[i]), i);
    // trainer.recompute: one block's worth of the activations not kept per layer, rewritten by every layer.
    for (int i = 0; i < kNumLayerActs; ++i)
        if (present(LayerAct(i)) && !kept_per_layer(LayerAct(i))) {
            const ActId shared = add_act(std::string("blk.") + kNames[i], i);
            for (auto& layer : h.layer) layer[i] = shared;
        }
    h.lnf = a.add("lnf", C);
    h.lnf_mean = a.add_f32("lnf_mean", 1);
    h.lnf_rstd = a.add_f32("lnf_rstd", 1);
    h.logits = add_lm_head_logits(a, cfg_.padded_vocab);  // after the per-row buffers: its budget
    h.losses = a.add_f32("losses", 1);
    // Backward scratch, reused by every layer (llm.c's CUDA layout): the residual-stream gradient and one
    // buffer per activation width. d_c first holds the head's gradient w.r.t. lnf, written by the forward.
    h.d_residual = a.add("d_residual", C);
    h.d_c = a.add("d_c", C);
    h.d_c2 = a.add("d_c2", C);
    h.d_qkv = a.add("d_qkv", 3 * C);
    h.d_f = a.add("d_f", F);
    h.inputs = a.add_i32("inputs", 1);  // token ids and targets where the kernels read them
    h.targets = a.add_i32("targets", 1);
    if (ids) *ids = h;
    return a.take();
}

void Gpt2::block_forward(int l, Tensor residual, bool to_residual3) {
    const int64_t C = cfg_.d_model, F = cfg_.d_ff, NH = cfg_.n_head;
    const Layer& L = w_.layers[static_cast<size_t>(l)];
    auto W = [&](ParamId id) { return store_.weight(id); };
    // Dropout in place on each residual branch before it is added; nothing that backward reads is
    // overwritten (matmul backward reads inputs, never outputs). The masks are stateless, so a re-run
    // block (trainer.recompute: all) draws the same ones.
    auto drop = [&](Tensor t, int site) {
        if (dropped_) kernels::dropout_forward(t, t, cfg_.dropout, dropout_seed_ + static_cast<uint64_t>(site));
    };
    kernels::layernorm_forward(act(l, kLn1, C), stat(l, kLn1Mean), stat(l, kLn1Rstd), residual, W(L.ln1_w),
                               W(L.ln1_b), cfg_.norm_eps);
    linear_forward(act(l, kQkv, 3 * C), act(l, kLn1, C), L.qkv_w, W(L.qkv_b));
    Tensor lse = acts_.shaped(ids_.layer[l][kLse], {B_, NH, T_});
    kernels::attention_forward(act(l, kAtty, C), lse, act(l, kQkv, 3 * C), static_cast<int>(NH),
                               static_cast<int>(NH));
    // residual2 = residual + attproj (+ dropout on the branch first, when training with it).
    if (dropped_) {
        linear_forward(act(l, kAttProj, C), act(l, kAtty, C), L.attn_proj_w, W(L.attn_proj_b));
        drop(act(l, kAttProj, C), 1 + 2 * l);
        kernels::residual_forward(act(l, kResidual2, C), residual, act(l, kAttProj, C));
    } else {
        linear_forward(act(l, kResidual2, C), act(l, kAtty, C), L.attn_proj_w, W(L.attn_proj_b), residual);
    }
    kernels::layernorm_forward(act(l, kLn2, C), stat(l, kLn2Mean), stat(l, kLn2Rstd), act(l, kResidual2, C),
                               W(L.ln2_w), W(L.ln2_b), cfg_.norm_eps);
    // fch_gelu = GELU(fch), fch = ln2 @ W^T + b (one cuBLASLt call with the GELU epilogue in bf16; with a
    // LoRA adapter on c_fc its delta joins fch before the GELU).
    if (lora_ && lora_->adapts(L.fc_w)) {
        linear_forward(act(l, kFch, F), act(l, kLn2, C), L.fc_w, W(L.fc_b));
        kernels::gelu_forward(act(l, kFchGelu, F), act(l, kFch, F));
    } else {
        kernels::matmul_forward_gelu(act(l, kFchGelu, F), act(l, kFch, F), act(l, kLn2, C), W(L.fc_w), W(L.fc_b));
    }
    if (!to_residual3) return;
    if (dropped_) {
        linear_forward(act(l, kFcProj, C), act(l, kFchGelu, F), L.mlp_proj_w, W(L.mlp_proj_b));
        drop(act(l, kFcProj, C), 2 + 2 * l);
        kernels::residual_forward(act(l, kResidual3, C), act(l, kResidual2, C), act(l, kFcProj, C));
    } else {
        linear_forward(act(l, kResidual3, C), act(l, kFchGelu, F), L.mlp_proj_w, W(L.mlp_proj_b),
                       act(l, kResidual2, C));
    }
}

float Gpt2::forward(const int32_t* inputs, const int32_t* targets, int B, int T, bool train, float loss_scale,
                    const int32_t* positions) {
    // GPT-2's learned position table has no layout for position ids: begin_forward refuses them.
    const Batch batch = begin_forward(
        acts_, [this](int b, int t) { return activation_layout(b, t); }, inputs, targets, B, T, train, positions);
    const int64_t C = cfg_.d_model, BT = static_cast<int64_t>(B) * T;
    auto W = [&](ParamId id) { return store_.weight(id); };
    Tensor encoded = acts_.btc(ids_.encoded, B, T, C);
    kernels::encoder_forward(encoded, acts_.bt(ids_.inputs, B, T), W(w_.wte), W(w_.wpe));
    // Dropout in place on the embeddings (site 0) and inside each block (block_forward).
    dropped_ = train && cfg_.dropout > 0.f;
    if (dropped_) kernels::dropout_forward(encoded, encoded, cfg_.dropout, dropout_seed_);
    Tensor residual = encoded;
    for (int l = 0; l < cfg_.n_layer; ++l) {
        block_forward(l, residual, /*to_residual3=*/true);
        residual = act(l, kResidual3, C);
    }
    Tensor lnf = acts_.btc(ids_.lnf, B, T, C);
    kernels::layernorm_forward(lnf, acts_.bt(ids_.lnf_mean, B, T), acts_.bt(ids_.lnf_rstd, B, T), residual,
                               W(w_.lnf_w), W(w_.lnf_b), cfg_.norm_eps);
    // The head's backward runs in the forward, chunk by chunk, leaving d lnf in d_c for backward().
    const HeadBuffers buf{lm_head_scratch(acts_, ids_.logits, cfg_.padded_vocab),
                          acts_.shaped(ids_.losses, {BT}), acts_.shaped(ids_.targets, {BT}),
                          acts_.shaped(ids_.d_c, {BT, C})};
    has_grad_ = train;
    return head_forward(batch, targets, acts_.shaped(ids_.lnf, {BT, C}), w_.head, buf, train, loss_scale);
}

void Gpt2::backward() {
    LLMT_INTERNAL_CHECK(has_grad_, "gpt2 backward: call forward(..., train = true) first");
    const int B = B_, T = T_;
    const int64_t C = cfg_.d_model, F = cfg_.d_ff, NH = cfg_.n_head;
    auto W = [&](ParamId id) { return store_.weight(id); };
    auto G = [&](ParamId id) { return store_.grad(id); };  // empty for a frozen base (LoRA): not computed
    // LayerNorm weight and bias gradients; a frozen base's go to two sinks nobody reads.
    auto GW = [&](ParamId id) { return grad_or_sink(id, 0); };
    auto GB = [&](ParamId id) { return grad_or_sink(id, 1); };
    Tensor dres = acts_.btc(ids_.d_residual, B, T, C);
    Tensor dc = acts_.btc(ids_.d_c, B, T, C), dc2 = acts_.btc(ids_.d_c2, B, T, C);
    Tensor dqkv = acts_.btc(ids_.d_qkv, B, T, 3 * C);
    Tensor df = acts_.btc(ids_.d_f, B, T, F);

    // dc holds d lnf (the forward ran the head's backward).
    Tensor last = act(cfg_.n_layer - 1, kResidual3, C);
    kernels::zero(dres);  // the residual stream accumulates (+=)
    // d(branch before dropout) = dropout'(d branch) with the forward's mask, into a scratch buffer: the
    // residual stream's own gradient passes the add unchanged. Without dropout the branch sees dres.
    auto undrop = [&](Tensor scratch, int site) {
        if (!dropped_) return dres;
        kernels::dropout_backward(scratch, dres, cfg_.dropout, dropout_seed_ + static_cast<uint64_t>(site));
        return scratch;
    };
    // Without dropout each projection's output gradient is the residual stream's gradient as a LayerNorm
    // backward leaves it, so that LayerNorm's pass sums its columns into the projection's bias gradient
    // (colsum_of: the c_proj bias whose gradient it is, or none), and matmul_backward skips it (proj_dbias).
    auto colsum_of = [&](ParamId bias) { return dropped_ ? Tensor() : G(bias); };
    auto proj_dbias = [&](ParamId bias) { return dropped_ ? G(bias) : Tensor(); };
    kernels::layernorm_backward(dres, GW(w_.lnf_w), GB(w_.lnf_b), dc, last, W(w_.lnf_w), acts_.bt(ids_.lnf_mean, B, T),
                                acts_.bt(ids_.lnf_rstd, B, T), colsum_of(w_.layers.back().mlp_proj_b));
    // The arena holds wte, wpe, the layers in order, ln_f, then lm_head: what backward has finished is
    // always a suffix of it.
    grads_ready_from(w_.lnf_w);
    for (int l = cfg_.n_layer - 1; l >= 0; --l) {
        const Layer& L = w_.layers[static_cast<size_t>(l)];
        Tensor residual = l == 0 ? acts_.btc(ids_.encoded, B, T, C) : act(l - 1, kResidual3, C);
        // trainer.recompute: the same kernels on the same inputs as the forward, so what they rewrite is
        // bit for bit what the forward wrote (the kernels are deterministic; one exception: bf16 on CUDA
        // fuses the forward's GELU into the GEMM epilogue from the fp32 sum, while gelu_forward starts from
        // the bf16-rounded pre-activation, so kMlp there differs by bf16 rounding).
        if (cfg_.recompute == Recompute::kAll) block_forward(l, residual, /*to_residual3=*/false);
        if (cfg_.recompute == Recompute::kMlp) kernels::gelu_forward(act(l, kFchGelu, F), act(l, kFch, F));
        // dres holds d residual3 = d fcproj = d residual2 (the residual add passes it through).
        // df = d fch (through the GELU: the DGELU epilogue in bf16).
        if (lora_ && lora_->adapts(L.mlp_proj_w)) {  // d fch_gelu (with the adapter's share), then the GELU
            linear_backward(df, undrop(dc, 2 + 2 * l), act(l, kFchGelu, F), L.mlp_proj_w, proj_dbias(L.mlp_proj_b));
            kernels::gelu_backward(df, act(l, kFch, F), df);
        } else {
            kernels::matmul_backward_gelu(df, act(l, kFch, F), G(L.mlp_proj_w), proj_dbias(L.mlp_proj_b),
                                          undrop(dc, 2 + 2 * l), act(l, kFchGelu, F), W(L.mlp_proj_w));
        }
        linear_backward(dc, df, act(l, kLn2, C), L.fc_w, G(L.fc_b));
        kernels::layernorm_backward(dres, GW(L.ln2_w), GB(L.ln2_b), dc, act(l, kResidual2, C), W(L.ln2_w),
                                    stat(l, kLn2Mean), stat(l, kLn2Rstd), colsum_of(L.attn_proj_b));
        // dres now holds d residual2 = d attproj = d residual.
        linear_backward(dc2, undrop(dc, 1 + 2 * l), act(l, kAtty, C), L.attn_proj_w, proj_dbias(L.attn_proj_b));
        // The qkv bias gradient (dqkv's column sums) comes out of the attention backward's own passes.
        kernels::attention_backward(dqkv, dc2, act(l, kQkv, 3 * C), act(l, kAtty, C),
                                    acts_.shaped(ids_.layer[l][kLse], {B, NH, T}), static_cast<int>(NH),
                                    static_cast<int>(NH), G(L.qkv_b));
        linear_backward(dc, dqkv, act(l, kLn1, C), L.qkv_w);
        // dres becomes d residual: layer l-1's mlp.c_proj output gradient (none below layer 0).
        kernels::layernorm_backward(dres, GW(L.ln1_w), GB(L.ln1_b), dc, residual, W(L.ln1_w), stat(l, kLn1Mean),
                                    stat(l, kLn1Rstd),
                                    l > 0 ? colsum_of(w_.layers[static_cast<size_t>(l - 1)].mlp_proj_b) : Tensor());
        grads_ready_from(L.ln1_w);
    }
    if (dropped_) kernels::dropout_backward(dres, dres, cfg_.dropout, dropout_seed_);
    if (!store_.frozen()) kernels::encoder_backward(G(w_.wte), G(w_.wpe), dres, acts_.bt(ids_.inputs, B, T));
    grads_ready_all();
    has_grad_ = false;
}

MemoryPlan Gpt2::memory_plan(int B, int T) const {
    MemoryPlan m = params_memory_plan(B, T);
    const int64_t C = cfg_.d_model, NH = cfg_.n_head;
    m.activations += activation_layout(B, T).nbytes() +
                     kernels::attention_backward_scratch_bytes(store_.device(), B, T, C, NH, NH, C / NH);
    return m;
}

std::unique_ptr<Decoder> Gpt2::decoder(int max_T) const { return std::make_unique<Gpt2Decoder>(*this, max_T); }

std::string Gpt2::hf_canonical_name(const std::string& n) const {
    auto ends = [&](std::string_view suf) { return n.size() >= suf.size() && n.compare(n.size() - suf.size(), suf.size(), suf) == 0; };
    if (ends(".attn.bias") || ends(".attn.masked_bias")) return "";
    if (n == "lm_head.weight") return cfg_.tie_embeddings ? "" : n;  // tied: the same values as wte
    if (n.rfind("transformer.", 0) == 0) return n;
    return "transformer." + n;
}

// ---- The family (models/arch.h): GPT2LMHeadModel's config.json and how a config builds the model. ----

namespace {

// config.json's fields (GPT2Config); transformers' class defaults where a field is absent. Refuses what
// the GPT-2 graph cannot compute: an activation other than the tanh GELU, unscaled or per-layer-scaled
// attention, the reordered upcast.
void read_gpt2_config(const nlohmann::json& j, const std::string& path, HfConfig& c) {
    const HfFields f(j, path);
    c.hidden_size = f.required_int("n_embd");
    c.num_hidden_layers = f.required_int("n_layer");
    c.num_attention_heads = f.required_int("n_head");
    c.vocab_size = f.required_int("vocab_size");
    c.max_position_embeddings = f.required_int("n_positions");
    c.num_key_value_heads = c.num_attention_heads;
    c.intermediate_size = f.int_or("n_inner", 4 * c.hidden_size);
    c.norm_eps = f.positive_or("layer_norm_epsilon", 1e-5);
    c.tie_word_embeddings = f.bool_or("tie_word_embeddings", true);
    if (c.hidden_size % c.num_attention_heads != 0)
        f.fail("n_embd", fmt::format("{} is not a multiple of n_head ({})", c.hidden_size, c.num_attention_heads));
    c.head_dim = c.hidden_size / c.num_attention_heads;
    c.field_of = {{"model.d_model", "n_embd"},
                  {"model.n_layer", "n_layer"},
                  {"model.n_head", "n_head"},
                  {"model.n_kv_head", "n_head"},
                  {"model.head_dim", "n_embd / n_head"},
                  {"model.d_ff", f.has("n_inner") ? "n_inner" : "n_inner (null: 4 x n_embd)"},
                  {"model.vocab_size", "vocab_size"},
                  {"model.block_size", "n_positions"},
                  {"model.norm_eps", f.has("layer_norm_epsilon") ? "layer_norm_epsilon" : "layer_norm_epsilon (absent: 1e-05)"},
                  {"model.tie_embeddings",
                   f.has("tie_word_embeddings") ? "tie_word_embeddings" : "tie_word_embeddings (absent: true)"}};
    f.refuse_unless(f.string_or("activation_function", "gelu_new") == "gelu_new", "activation_function",
                    "llmtrain's GPT-2 uses the tanh GELU (gelu_new)");
    f.refuse_unless(f.bool_or("scale_attn_weights", true), "scale_attn_weights",
                    "llmtrain's attention always scales by 1/sqrt(head_dim)");
    f.refuse_unless(!f.bool_or("scale_attn_by_inverse_layer_idx", false), "scale_attn_by_inverse_layer_idx",
                    "llmtrain's attention does not scale by layer");
    f.refuse_unless(!f.bool_or("reorder_and_upcast_attn", false), "reorder_and_upcast_attn",
                    "not implemented in llmtrain's attention");
    c.default_bos_token_id = c.default_eos_token_id = {50256};  // GPT2Config's defaults
}

void write_gpt2_config(const config::ModelConfig& m, const HfExportInfo&, int max_pos, nlohmann::json& j) {
    j["n_embd"] = m.d_model;
    j["n_layer"] = m.n_layer;
    j["n_head"] = m.n_head;
    j["n_inner"] = m.d_ff;
    j["n_positions"] = max_pos;
    j["n_ctx"] = max_pos;
    j["activation_function"] = "gelu_new";
    j["layer_norm_epsilon"] = hf_decimal(m.norm_eps);
    j["resid_pdrop"] = 0.0;
    j["embd_pdrop"] = 0.0;
    j["attn_pdrop"] = 0.0;
}

Gpt2Config gpt2_config(const config::Config& cfg) {
    Gpt2Config c = Gpt2Config::from(cfg.model);
    c.recompute = recompute_from_name(cfg.trainer.recompute);
    c.lora = lora_spec(cfg);
    return c;
}

}  // namespace

const ArchSpec& gpt2_arch() {
    static const ArchSpec spec = [] {
        ArchSpec s;
        s.entry = config::find_arch("gpt2");
        s.model_types = {"gpt2"};
        s.hf_class = "GPT2LMHeadModel";
        s.read_hf_config = read_gpt2_config;
        s.write_hf_config = write_gpt2_config;
        s.make = [](const config::Config& cfg, Device device, DType dtype) -> std::unique_ptr<Model> {
            return std::make_unique<Gpt2>(gpt2_config(cfg), device, dtype);
        };
        s.plan_memory = [](const config::Config& cfg, Device device, DType dtype, int B, int T) {
            return Gpt2::plan_memory(gpt2_config(cfg), device, dtype, B, T);
        };
        s.flops_per_token = [](const config::ModelConfig& m, int T) { return Gpt2Config::from(m).flops_per_token(T); };
        s.lora_targets = {"c_attn"};
        return s;
    }();
    return spec;
}

}  // namespace llmt::models
