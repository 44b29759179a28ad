#include "models/llama.h"

#include <fmt/format.h>

#include "config/config.h"
#include "core/check.h"
#include "core/error.h"
#include "models/arch.h"
#include "models/hf_config.h"
#include "models/hf_fields.h"
#include "models/hf_llama_config.h"
#include "models/registry.h"

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
    const config::ModelConfig::Rope& rope = m.rope;
    c.rope_theta = rope.theta;
    c.rope_scaling.kind = rope.scaling.type;
    c.rope_scaling.factor = rope.scaling.factor;
    c.rope_scaling.low_freq_factor = rope.scaling.low_freq_factor;
    c.rope_scaling.high_freq_factor = rope.scaling.high_freq_factor;
    c.rope_scaling.original_max_position_embeddings = rope.scaling.original_max_position_embeddings;
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

namespace {

// The shared blocks as LLaMA: RMSNorm, RoPE, grouped-query attention, SwiGLU, no biases, plus the
// variant's parts. The sizes are checked first (the blocks' widths divide by them).
TransformerShape llama_shape(const LlamaConfig& cfg) {
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
    TransformerShape s{cfg.arch, cfg.n_layer, cfg.block_size, cfg.vocab_size, cfg.padded_vocab, {}, cfg.shard};
    BlockConfig& b = s.block;
    b.d_model = cfg.d_model;
    b.n_head = cfg.n_head;
    b.n_kv_head = cfg.n_kv_head;
    b.head_dim = cfg.hd();
    b.d_ff = cfg.d_ff;
    b.norm = NormKind::kRmsNorm;
    b.norm_eps = cfg.norm_eps;
    b.qkv_bias = cfg.qkv_bias;
    b.qk_norm = cfg.qk_norm;
    b.rope = true;
    b.window = cfg.sliding_window;
    b.mlp = MlpKind::kSwiglu;
    b.recompute = cfg.recompute;
    return s;
}

}  // namespace

Llama::Llama(const LlamaConfig& cfg, Device device, DType dtype) : Llama(cfg, device, dtype, LayoutOnly{}) {
    allocate(rope_table(cfg_.block_size, cfg_.hd(), cfg_.rope_theta, cfg_.rope_scaling));
}

MemoryPlan Llama::plan_memory(const LlamaConfig& cfg, Device device, DType dtype, int B, int T) {
    return Llama(cfg, device, dtype, LayoutOnly{}).memory_plan(B, T);
}

Llama::Llama(const LlamaConfig& cfg, Device device, DType dtype, LayoutOnly)
    : Transformer(llama_shape(cfg)), cfg_(cfg) {
    const int64_t C = cfg.d_model, F = cfg.d_ff, Vp = cfg.padded_vocab, HD = cfg.hd();
    const int64_t Q = cfg.n_head * HD, KV = cfg.n_kv_head * HD;
    auto matrix = [&](std::string name, int64_t rows, int64_t cols, std::vector<HfPart> hf = {}) {
        ParamSpec s = ParamSpec::make(std::move(name), {rows, cols}, ParamInit::kNormal, ParamKind::kWeight);
        s.hf = std::move(hf);
        return store_.add(std::move(s));
    };
    auto norm = [&](std::string name, int64_t width) {
        return NormParams{store_.add(ParamSpec::make(std::move(name), {width}, ParamInit::kOnes, ParamKind::kNorm))};
    };
    auto vocab_table = [&](const std::string& name, ParamKind kind) {
        ParamSpec s = ParamSpec::make(name, {Vp, C}, ParamInit::kNormal, kind);
        s.hf = {{name, cfg.vocab_size}};  // HF has no padding rows
        return store_.add(std::move(s));
    };
    w_.embed = vocab_table("model.embed_tokens.weight", ParamKind::kEmbedding);
    for (int l = 0; l < cfg.n_layer; ++l) {
        const std::string p = fmt::format("model.layers.{}.", l);
        LayerParams L{};
        L.attn.norm = norm(p + "input_layernorm.weight", C);
        L.attn.qkv = matrix(p + "self_attn.qkv_proj.weight", Q + 2 * KV, C,
                            {{p + "self_attn.q_proj.weight", Q}, {p + "self_attn.k_proj.weight", KV},
                             {p + "self_attn.v_proj.weight", KV}});
        if (cfg.qkv_bias) {
            ParamSpec b =
                ParamSpec::make(p + "self_attn.qkv_proj.bias", {Q + 2 * KV}, ParamInit::kZeros, ParamKind::kBias);
            b.hf = {{p + "self_attn.q_proj.bias", Q},
                    {p + "self_attn.k_proj.bias", KV},
                    {p + "self_attn.v_proj.bias", KV}};
            L.attn.qkv_b = store_.add(std::move(b));
        }
        if (cfg.qk_norm) {
            L.attn.q_norm = norm(p + "self_attn.q_norm.weight", HD).w;
            L.attn.k_norm = norm(p + "self_attn.k_norm.weight", HD).w;
        }
        L.attn.o = matrix(p + "self_attn.o_proj.weight", C, Q);
        L.mlp.norm = norm(p + "post_attention_layernorm.weight", C);
        L.mlp.up = matrix(p + "mlp.gate_up_proj.weight", 2 * F, C,
                          {{p + "mlp.gate_proj.weight", F}, {p + "mlp.up_proj.weight", F}});
        L.mlp.down = matrix(p + "mlp.down_proj.weight", C, F);
        w_.layers.push_back(L);
    }
    w_.norm = norm("model.norm.weight", C);
    w_.head = cfg.tie_embeddings ? w_.embed : vocab_table("lm_head.weight", ParamKind::kWeight);
    finish_layout(cfg.lora, device, dtype);
}

std::string Llama::summary() const {
    return fmt::format(
        "{}, {} layers, d_model {}, {} heads ({} kv, head_dim {}{}), d_ff {}, block {}, vocab {} "
        "(padded {}), rope theta {:g}{}{}, {} embeddings, {:.2f}M parameters",
        cfg_.arch, cfg_.n_layer, cfg_.d_model, cfg_.n_head, cfg_.n_kv_head, cfg_.hd(),
        cfg_.qkv_bias  ? ", q/k/v bias"
        : cfg_.qk_norm ? ", q/k norm"
                       : "",
        cfg_.d_ff, cfg_.block_size, cfg_.vocab_size, cfg_.padded_vocab, cfg_.rope_theta,
        cfg_.rope_scaling.kind == "none" ? "" : " (" + cfg_.rope_scaling.kind + " scaling)",
        cfg_.sliding_window > 0 ? fmt::format(", sliding window {}", cfg_.sliding_window) : "",
        cfg_.tie_embeddings ? "tied" : "untied", static_cast<double>(num_parameters()) / 1e6);
}

void Llama::init_base(uint64_t seed) { store_.init_random(seed, 0.02, 0.02); }

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

ArchSpec llama_graph_spec(const std::string& name, const LlamaVariant& variant) {
    ArchSpec s;
    s.entry = config::find_arch(name);
    LLMT_ASSERT(s.entry != nullptr);
    s.model_types = {name};
    s.needs_config_json = true;  // RoPE and the norms' eps are not in the weights
    auto config_of = [variant](const config::Config& cfg) {
        LlamaConfig c = llama_graph_config(cfg);
        variant(cfg.model, c);
        return c;
    };
    s.make = [config_of](const config::Config& cfg, Device device, DType dtype,
                         ParamShard shard) -> std::unique_ptr<Model> {
        LlamaConfig c = config_of(cfg);
        c.shard = shard;
        return std::make_unique<Llama>(c, device, dtype);
    };
    s.plan_memory = [config_of](const config::Config& cfg, Device device, DType dtype, int B, int T) {
        return Llama::plan_memory(config_of(cfg), device, dtype, B, T);
    };
    s.flops_per_token = [variant](const config::ModelConfig& m, int T) {
        LlamaConfig c = LlamaConfig::from(m);
        variant(m, c);
        return c.flops_per_token(T);
    };
    s.lora_targets = {"q_proj", "v_proj"};  // PEFT's default for the LLaMA-shaped families
    return s;
}

const ArchSpec& llama_arch() {
    static const ArchSpec spec = [] {
        ArchSpec s = llama_graph_spec("llama", [](const config::ModelConfig&, LlamaConfig&) {});
        s.hf_class = "LlamaForCausalLM";
        s.read_hf_config = read_llama_config;
        s.write_hf_config = write_llama_config;
        return s;
    }();
    return spec;
}

}  // namespace llmt::models
