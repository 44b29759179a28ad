#include "models/gpt2.h"

#include <fmt/format.h>

#include <cmath>

#include "config/config.h"
#include "core/check.h"
#include "core/error.h"
#include "models/arch.h"
#include "models/hf_config.h"
#include "models/hf_fields.h"
#include "models/registry.h"

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

namespace {

// The shared blocks as GPT-2: LayerNorm, biases, learned positions, multi-head attention, GELU MLP. The
// sizes are checked first (the blocks' widths divide by them).
TransformerShape gpt2_shape(const Gpt2Config& cfg) {
    LLMT_CHECK(cfg.n_layer > 0 && cfg.n_head > 0 && cfg.d_model > 0 && cfg.d_ff > 0 && cfg.block_size > 0 &&
                   cfg.vocab_size > 0 && cfg.padded_vocab >= cfg.vocab_size,
               "gpt2: invalid sizes (n_layer {}, n_head {}, d_model {}, d_ff {}, block_size {}, vocab {}/{})",
               cfg.n_layer, cfg.n_head, cfg.d_model, cfg.d_ff, cfg.block_size, cfg.vocab_size, cfg.padded_vocab);
    LLMT_CHECK(cfg.dropout >= 0.f && cfg.dropout < 1.f, "gpt2: dropout {} outside [0, 1)", cfg.dropout);
    LLMT_CHECK(cfg.d_model % cfg.n_head == 0, "gpt2: d_model {} not divisible by n_head {}", cfg.d_model,
               cfg.n_head);
    TransformerShape s{"gpt2", cfg.n_layer, cfg.block_size, cfg.vocab_size, cfg.padded_vocab, {}, cfg.shard};
    BlockConfig& b = s.block;
    b.d_model = cfg.d_model;
    b.n_head = b.n_kv_head = cfg.n_head;
    b.head_dim = cfg.d_model / cfg.n_head;
    b.d_ff = cfg.d_ff;
    b.norm = NormKind::kLayerNorm;
    b.norm_eps = cfg.norm_eps;
    b.bias = true;
    b.mlp = MlpKind::kGelu;
    b.dropout = cfg.dropout;
    b.recompute = cfg.recompute;
    return s;
}

}  // namespace

Gpt2::Gpt2(const Gpt2Config& cfg, Device device, DType dtype) : Gpt2(cfg, device, dtype, LayoutOnly{}) {
    allocate({});
}

MemoryPlan Gpt2::plan_memory(const Gpt2Config& cfg, Device device, DType dtype, int B, int T) {
    return Gpt2(cfg, device, dtype, LayoutOnly{}).memory_plan(B, T);
}

Gpt2::Gpt2(const Gpt2Config& cfg, Device device, DType dtype, LayoutOnly) : Transformer(gpt2_shape(cfg)), cfg_(cfg) {
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
    auto layer_norm = [&](const std::string& name) {
        return NormParams{add(name + ".weight", {C}, ParamInit::kOnes, ParamKind::kNorm, false),
                          add(name + ".bias", {C}, ParamInit::kZeros, ParamKind::kNorm, false)};
    };
    w_.embed = add_vocab_table("transformer.wte.weight", ParamKind::kEmbedding);
    {
        ParamSpec wpe =
            ParamSpec::make("transformer.wpe.weight", {cfg.block_size, C}, ParamInit::kNormal, ParamKind::kEmbedding);
        wpe.hf_crop_rows = true;  // a model trained with a longer context keeps its first block_size positions
        w_.positions = store_.add(std::move(wpe));
    }
    for (int l = 0; l < cfg.n_layer; ++l) {
        const std::string p = fmt::format("transformer.h.{}.", l);
        LayerParams L{};
        L.attn.norm = layer_norm(p + "ln_1");
        L.attn.qkv = add(p + "attn.c_attn.weight", {3 * C, C}, ParamInit::kNormal, ParamKind::kWeight, true);
        L.attn.qkv_b = add(p + "attn.c_attn.bias", {3 * C}, ParamInit::kZeros, ParamKind::kBias, false);
        L.attn.o = add(p + "attn.c_proj.weight", {C, C}, ParamInit::kNormalResidual, ParamKind::kWeight, true);
        L.attn.o_b = add(p + "attn.c_proj.bias", {C}, ParamInit::kZeros, ParamKind::kBias, false);
        L.mlp.norm = layer_norm(p + "ln_2");
        L.mlp.up = add(p + "mlp.c_fc.weight", {F, C}, ParamInit::kNormal, ParamKind::kWeight, true);
        L.mlp.up_b = add(p + "mlp.c_fc.bias", {F}, ParamInit::kZeros, ParamKind::kBias, false);
        L.mlp.down = add(p + "mlp.c_proj.weight", {C, F}, ParamInit::kNormalResidual, ParamKind::kWeight, true);
        L.mlp.down_b = add(p + "mlp.c_proj.bias", {C}, ParamInit::kZeros, ParamKind::kBias, false);
        w_.layers.push_back(L);
    }
    w_.norm = layer_norm("transformer.ln_f");
    w_.head = cfg.tie_embeddings ? w_.embed : add_vocab_table("lm_head.weight", ParamKind::kWeight);
    finish_layout(cfg.lora, device, dtype);
}

std::string Gpt2::summary() const {
    return fmt::format("gpt2, {} layers, d_model {}, {} heads, block {}, vocab {} (padded {}), {:.2f}M parameters",
                       cfg_.n_layer, cfg_.d_model, cfg_.n_head, cfg_.block_size, cfg_.vocab_size, cfg_.padded_vocab,
                       static_cast<double>(num_parameters()) / 1e6);
}

void Gpt2::init_base(uint64_t seed) { store_.init_random(seed, 0.02, 0.02 / std::sqrt(2.0 * cfg_.n_layer)); }

std::string Gpt2::hf_canonical_name(const std::string& n) const {
    auto ends = [&](std::string_view suf) {
        return n.size() >= suf.size() && n.compare(n.size() - suf.size(), suf.size(), suf) == 0;
    };
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
    c.field_of = {
        {"model.d_model", "n_embd"},
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
        s.make = [](const config::Config& cfg, Device device, DType dtype,
                    ParamShard shard) -> std::unique_ptr<Model> {
            Gpt2Config c = gpt2_config(cfg);
            c.shard = shard;
            return std::make_unique<Gpt2>(c, device, dtype);
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
