#include "models/hf_llama_config.h"

#include <fmt/format.h>

#include "config/config.h"
#include "models/hf_config.h"
#include "models/hf_fields.h"

namespace llmt::models {

using nlohmann::json;

namespace {

// model.rope_theta and model.rope_scaling.* as the config takes them (the llama3 keys only with that type).
void add_rope_values(HfConfig& c) {
    c.family_values.push_back({"model.rope_theta", c.rope.theta});
    c.family_values.push_back({"model.rope_scaling.type", c.rope.scaling.type});
    if (c.rope.scaling.type != "llama3") return;
    c.family_values.push_back({"model.rope_scaling.factor", c.rope.scaling.factor});
    c.family_values.push_back({"model.rope_scaling.low_freq_factor", c.rope.scaling.low_freq_factor});
    c.family_values.push_back({"model.rope_scaling.high_freq_factor", c.rope.scaling.high_freq_factor});
    c.family_values.push_back({"model.rope_scaling.original_max_position_embeddings",
                               c.rope.scaling.original_max_position_embeddings});
}

}  // namespace

// RoPE of a LLaMA-shaped config. transformers 5.x reads `rope_scaling` (legacy) in preference to
// `rope_parameters`, and a top-level `rope_theta` where the dict has none (RotaryEmbeddingConfigMixin.
// convert_rope_params_to_dict); 4.x reads rope_theta and rope_scaling, whose type is `rope_type` or the
// older `type`. Both readings are the one below.
void read_hf_rope(const json& j, const std::string& path, HfConfig& c) {
    const HfFields top(j, path);
    const char* dict_name = nullptr;
    if (top.has("rope_scaling")) {
        dict_name = "rope_scaling";
    } else if (top.has("rope_parameters")) {
        dict_name = "rope_parameters";
    }
    static const json kEmpty = json::object();
    const json& dict = dict_name ? j[dict_name] : kEmpty;
    if (!dict.is_object()) top.fail(dict_name, fmt::format("expected a mapping, found {}", top.found(dict_name)));
    const HfFields d(dict, path, dict_name ? std::string(dict_name) + "." : "");

    if (d.has("rope_theta")) {
        c.rope.theta = d.positive_or("rope_theta", 0);
        c.field_of["model.rope_theta"] = d.name("rope_theta");
    } else {
        c.rope.theta = top.positive_or("rope_theta", 10000.0);
        c.field_of["model.rope_theta"] = top.has("rope_theta") ? "rope_theta" : "rope_theta (absent: 10000)";
    }
    const char* type_field = d.has("rope_type") ? "rope_type" : "type";
    const std::string type = d.string_or(type_field, "default");
    c.field_of["model.rope_scaling.type"] = d.has(type_field) ? d.name(type_field) : "rope_type (absent: default)";
    if (type == "default") {
        add_rope_values(c);
        return;
    }
    d.refuse_unless(type == "llama3", type_field,
                    "llmtrain computes RoPE as transformers' \"default\" and \"llama3\" types only");
    c.rope.scaling.type = "llama3";
    auto need = [&](const char* f) {
        if (!d.has(f)) d.fail(f, "missing (rope type llama3 needs factor, low_freq_factor, high_freq_factor and "
                                 "original_max_position_embeddings)");
        c.field_of[std::string("model.rope_scaling.") + f] = d.name(f);
        return d.positive_or(f, 0);
    };
    c.rope.scaling.factor = need("factor");
    c.rope.scaling.low_freq_factor = need("low_freq_factor");
    c.rope.scaling.high_freq_factor = need("high_freq_factor");
    if (!d.has("original_max_position_embeddings") && top.has("original_max_position_embeddings")) {
        c.rope.scaling.original_max_position_embeddings =
            static_cast<int>(top.integer("original_max_position_embeddings"));
        c.field_of["model.rope_scaling.original_max_position_embeddings"] = "original_max_position_embeddings";
    } else {
        if (!d.has("original_max_position_embeddings")) need("original_max_position_embeddings");
        c.rope.scaling.original_max_position_embeddings =
            static_cast<int>(d.integer("original_max_position_embeddings"));
        c.field_of["model.rope_scaling.original_max_position_embeddings"] = d.name("original_max_position_embeddings");
    }
    add_rope_values(c);
}

void read_hf_llama_shape(const json& j, const std::string& path, HfConfig& c) {
    const HfFields f(j, path);
    c.hidden_size = f.required_int("hidden_size");
    c.num_hidden_layers = f.required_int("num_hidden_layers");
    c.num_attention_heads = f.required_int("num_attention_heads");
    c.intermediate_size = f.required_int("intermediate_size");
    c.vocab_size = f.required_int("vocab_size");
    c.max_position_embeddings = f.required_int("max_position_embeddings");
    c.num_key_value_heads = f.int_or("num_key_value_heads", c.num_attention_heads);
    c.head_dim = f.int_or("head_dim", c.hidden_size / c.num_attention_heads);
    c.norm_eps = f.positive_or("rms_norm_eps", 1e-6);
    c.tie_word_embeddings = f.bool_or("tie_word_embeddings", false);
    c.field_of = {
        {"model.d_model", "hidden_size"},
        {"model.n_layer", "num_hidden_layers"},
        {"model.n_head", "num_attention_heads"},
        {"model.d_ff", "intermediate_size"},
        {"model.vocab_size", "vocab_size"},
        {"model.block_size", "max_position_embeddings"},
        {"model.n_kv_head",
         f.has("num_key_value_heads") ? "num_key_value_heads" : "num_key_value_heads (absent: num_attention_heads)"},
        {"model.head_dim", f.has("head_dim") ? "head_dim" : "head_dim (absent: hidden_size / num_attention_heads)"},
        {"model.norm_eps", f.has("rms_norm_eps") ? "rms_norm_eps" : "rms_norm_eps (absent: 1e-06)"},
        {"model.tie_embeddings",
         f.has("tie_word_embeddings") ? "tie_word_embeddings" : "tie_word_embeddings (absent: false)"}};
    f.refuse_unless(f.string_or("hidden_act", "silu") == "silu", "hidden_act", "the MLP is SwiGLU (silu)");
    f.refuse_unless(!f.bool_or("mlp_bias", false), "mlp_bias", "the MLP has no biases");
    if (c.hidden_size % c.num_attention_heads != 0)
        f.fail("hidden_size", fmt::format("{} is not a multiple of num_attention_heads ({}), which transformers "
                                          "requires too",
                                          c.hidden_size, c.num_attention_heads));
    if (c.num_attention_heads % c.num_key_value_heads != 0)
        f.fail("num_key_value_heads", fmt::format("num_attention_heads ({}) must be a multiple of it, found {}",
                                                  c.num_attention_heads, c.num_key_value_heads));
    read_hf_rope(j, path, c);
}

void refuse_hf_layer_types(const json& j, const std::string& path, const char* allowed, const char* why) {
    const HfFields f(j, path);
    if (!f.has("layer_types")) return;
    const json& types = j["layer_types"];
    if (!types.is_array()) f.fail("layer_types", fmt::format("expected a list, found {}", f.found("layer_types")));
    for (const json& t : types)
        if (!t.is_string() || t.get<std::string>() != allowed)
            f.fail("layer_types", fmt::format("{} is not supported: {}", t.dump(), why));
}

void write_hf_llama_shape(const config::ModelConfig& m, int max_pos, json& j) {
    j["hidden_size"] = m.d_model;
    j["intermediate_size"] = m.d_ff;
    j["num_hidden_layers"] = m.n_layer;
    j["num_attention_heads"] = m.n_head;
    j["num_key_value_heads"] = m.n_kv_head;
    j["head_dim"] = m.head_dim;
    j["hidden_act"] = "silu";
    j["max_position_embeddings"] = max_pos;
    j["rms_norm_eps"] = hf_decimal(m.norm_eps);
    j["attention_dropout"] = 0.0;
    j["use_cache"] = true;
    const config::ModelConfig::Rope& rope = m.rope;
    json params = {{"rope_type", "default"}, {"rope_theta", hf_decimal(rope.theta)}};
    json legacy = nullptr;
    if (rope.scaling.type == "llama3") {
        legacy = {{"rope_type", "llama3"},
                  {"factor", rope.scaling.factor},
                  {"low_freq_factor", rope.scaling.low_freq_factor},
                  {"high_freq_factor", rope.scaling.high_freq_factor},
                  {"original_max_position_embeddings", rope.scaling.original_max_position_embeddings}};
        params = legacy;
        params["rope_theta"] = hf_decimal(rope.theta);
    }
    j["rope_parameters"] = params;              // 5.x
    j["rope_theta"] = hf_decimal(rope.theta);  // 4.x; 5.x folds it into rope_parameters (the same value)
    j["rope_scaling"] = legacy;                   // 4.x; 5.x prefers it to rope_parameters (the same values)
}

}  // namespace llmt::models
