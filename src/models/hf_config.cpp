#include "models/hf_config.h"

#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "config/config.h"
#include "config/loader.h"
#include "config/schema.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/json_parse.h"

namespace llmt::models {

namespace {

using nlohmann::json;

// Reads typed fields of one JSON object of config.json; every error names the file and the field.
class Fields {
public:
    Fields(const json& obj, std::string path, std::string prefix = "")
        : obj_(obj), path_(std::move(path)), prefix_(std::move(prefix)) {}

    bool has(const char* f) const { return obj_.contains(f) && !obj_[f].is_null(); }
    std::string name(const char* f) const { return prefix_ + f; }

    [[noreturn]] void fail(const char* f, const std::string& what) const {
        throw FormatError(fmt::format("{}: `{}`: {}", path_, name(f), what));
    }
    std::string found(const char* f) const {
        std::string s = obj_[f].dump();
        return s.size() > 40 ? s.substr(0, 37) + "..." : s;
    }

    int64_t integer(const char* f, int64_t min = 1) const {
        const json& v = obj_[f];
        if (!v.is_number_integer()) fail(f, fmt::format("expected an integer, found {}", found(f)));
        const int64_t x = v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX ? INT64_MAX : v.get<int64_t>();
        if (x < min || x > INT32_MAX) fail(f, fmt::format("expected an integer >= {} and < 2^31, found {}", min, x));
        return x;
    }
    int required_int(const char* f) const {
        if (!has(f)) fail(f, "missing (a shape field llmtrain does not guess)");
        return static_cast<int>(integer(f));
    }
    int int_or(const char* f, int def) const { return has(f) ? static_cast<int>(integer(f)) : def; }

    double number(const char* f) const {
        const json& v = obj_[f];
        if (!v.is_number() || !std::isfinite(v.get<double>()))
            fail(f, fmt::format("expected a number, found {}", found(f)));
        return v.get<double>();
    }
    double positive_or(const char* f, double def) const {
        if (!has(f)) return def;
        const double x = number(f);
        if (!(x > 0)) fail(f, fmt::format("expected a number > 0, found {}", found(f)));
        return x;
    }
    bool bool_or(const char* f, bool def) const {
        if (!has(f)) return def;
        if (!obj_[f].is_boolean()) fail(f, fmt::format("expected true or false, found {}", found(f)));
        return obj_[f].get<bool>();
    }
    std::string string_or(const char* f, std::string def) const {
        if (!has(f)) return def;
        if (!obj_[f].is_string()) fail(f, fmt::format("expected a string, found {}", found(f)));
        return obj_[f].get<std::string>();
    }
    // An int, a list of ints, or null/absent (empty).
    std::vector<int64_t> token_ids(const char* f) const {
        if (!has(f)) return {};
        const json& v = obj_[f];
        std::vector<int64_t> out;
        auto one = [&](const json& e) {
            if (!e.is_number_integer() || e.get<int64_t>() < 0)
                fail(f, fmt::format("expected a token id (an integer >= 0) or a list of them, found {}", found(f)));
            out.push_back(e.get<int64_t>());
        };
        if (v.is_array()) {
            for (const auto& e : v) one(e);
        } else {
            one(v);
        }
        return out;
    }
    // A refusal of a value llmtrain cannot compute.
    void refuse_unless(bool ok, const char* f, const std::string& why) const {
        if (!ok) fail(f, fmt::format("{} is not supported: {}", found(f), why));
    }

private:
    const json& obj_;
    std::string path_, prefix_;
};

// RoPE of a LlamaConfig. transformers 5.x reads `rope_scaling` (legacy) in preference to
// `rope_parameters`, and a top-level `rope_theta` where the dict has none (RotaryEmbeddingConfigMixin.
// convert_rope_params_to_dict); 4.x reads rope_theta and rope_scaling, whose type is `rope_type` or the
// older `type`. Both readings are the one below.
void parse_llama_rope(const json& j, const std::string& path, HfConfig& c) {
    const Fields top(j, path);
    const char* dict_name = nullptr;
    if (top.has("rope_scaling")) {
        dict_name = "rope_scaling";
    } else if (top.has("rope_parameters")) {
        dict_name = "rope_parameters";
    }
    static const json kEmpty = json::object();
    const json& dict = dict_name ? j[dict_name] : kEmpty;
    if (!dict.is_object()) top.fail(dict_name, fmt::format("expected a mapping, found {}", top.found(dict_name)));
    const Fields d(dict, path, dict_name ? std::string(dict_name) + "." : "");

    if (d.has("rope_theta")) {
        c.rope_theta = d.positive_or("rope_theta", 0);
        c.field_of["model.rope_theta"] = d.name("rope_theta");
    } else {
        c.rope_theta = top.positive_or("rope_theta", 10000.0);
        c.field_of["model.rope_theta"] = top.has("rope_theta") ? "rope_theta" : "rope_theta (absent: 10000)";
    }
    const char* type_field = d.has("rope_type") ? "rope_type" : "type";
    const std::string type = d.string_or(type_field, "default");
    c.field_of["model.rope_scaling.type"] = d.has(type_field) ? d.name(type_field) : "rope_type (absent: default)";
    if (type == "default") return;
    d.refuse_unless(type == "llama3", type_field,
                    "llmtrain computes RoPE as transformers' \"default\" and \"llama3\" types only");
    c.rope_type = "llama3";
    auto need = [&](const char* f) {
        if (!d.has(f)) d.fail(f, "missing (rope type llama3 needs factor, low_freq_factor, high_freq_factor and "
                                 "original_max_position_embeddings)");
        c.field_of[std::string("model.rope_scaling.") + f] = d.name(f);
        return d.positive_or(f, 0);
    };
    c.rope_factor = need("factor");
    c.rope_low_freq_factor = need("low_freq_factor");
    c.rope_high_freq_factor = need("high_freq_factor");
    if (!d.has("original_max_position_embeddings") && top.has("original_max_position_embeddings")) {
        c.rope_original_max_position_embeddings = static_cast<int>(top.integer("original_max_position_embeddings"));
        c.field_of["model.rope_scaling.original_max_position_embeddings"] = "original_max_position_embeddings";
    } else {
        if (!d.has("original_max_position_embeddings")) need("original_max_position_embeddings");
        c.rope_original_max_position_embeddings = static_cast<int>(d.integer("original_max_position_embeddings"));
        c.field_of["model.rope_scaling.original_max_position_embeddings"] = d.name("original_max_position_embeddings");
    }
}

void parse_llama(const json& j, const std::string& path, HfConfig& c) {
    const Fields f(j, path);
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
    c.field_of = {{"model.d_model", "hidden_size"},
                  {"model.n_layer", "num_hidden_layers"},
                  {"model.n_head", "num_attention_heads"},
                  {"model.d_ff", "intermediate_size"},
                  {"model.vocab_size", "vocab_size"},
                  {"model.block_size", "max_position_embeddings"},
                  {"model.n_kv_head", f.has("num_key_value_heads") ? "num_key_value_heads"
                                                                   : "num_key_value_heads (absent: num_attention_heads)"},
                  {"model.head_dim", f.has("head_dim") ? "head_dim" : "head_dim (absent: hidden_size / num_attention_heads)"},
                  {"model.norm_eps", f.has("rms_norm_eps") ? "rms_norm_eps" : "rms_norm_eps (absent: 1e-06)"},
                  {"model.tie_embeddings",
                   f.has("tie_word_embeddings") ? "tie_word_embeddings" : "tie_word_embeddings (absent: false)"}};
    f.refuse_unless(f.string_or("hidden_act", "silu") == "silu", "hidden_act", "LLaMA's MLP is SwiGLU (silu)");
    f.refuse_unless(!f.bool_or("attention_bias", false), "attention_bias", "llmtrain's LLaMA has no biases");
    f.refuse_unless(!f.bool_or("mlp_bias", false), "mlp_bias", "llmtrain's LLaMA has no biases");
    if (c.hidden_size % c.num_attention_heads != 0)
        f.fail("hidden_size", fmt::format("{} is not a multiple of num_attention_heads ({}), which transformers "
                                          "requires too",
                                          c.hidden_size, c.num_attention_heads));
    if (c.num_attention_heads % c.num_key_value_heads != 0)
        f.fail("num_key_value_heads", fmt::format("num_attention_heads ({}) must be a multiple of it, found {}",
                                                  c.num_attention_heads, c.num_key_value_heads));
    parse_llama_rope(j, path, c);
}

void parse_gpt2(const json& j, const std::string& path, HfConfig& c) {
    const Fields f(j, path);
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
}

}  // namespace

HfConfig parse_hf_config(std::string_view text, const std::string& path) {
    const json j = parse_json(text, path, JsonLimits{.max_bytes = std::size_t{1} << 20, .max_depth = 16});
    if (!j.is_object()) throw FormatError(fmt::format("{}: expected a JSON object (a model config.json)", path));
    const Fields f(j, path);
    HfConfig c;
    c.path = path;
    if (!f.has("model_type")) f.fail("model_type", "missing (expected llama or gpt2)");
    c.model_type = f.string_or("model_type", "");
    if (c.model_type == "llama") {
        parse_llama(j, path, c);
    } else if (c.model_type == "gpt2") {
        parse_gpt2(j, path, c);
    } else {
        f.fail("model_type", fmt::format("{} is not supported (expected llama or gpt2)", f.found("model_type")));
    }
    c.field_of["model.arch"] = "model_type";
    c.bos_token_id = f.token_ids("bos_token_id");
    c.eos_token_id = f.token_ids("eos_token_id");
    if (c.model_type == "gpt2" && !f.has("bos_token_id")) c.bos_token_id = {50256};  // GPT2Config defaults
    if (c.model_type == "gpt2" && !f.has("eos_token_id")) c.eos_token_id = {50256};
    c.dtype = f.has("dtype") ? f.string_or("dtype", "") : f.string_or("torch_dtype", "");
    return c;
}

HfConfig read_hf_config(const std::filesystem::path& file) {
    return parse_hf_config(read_file(file, std::size_t{1} << 20), file.string());
}

namespace {

// A value from config.json for one of our keys, in the resolved config's JSON types.
struct Taken {
    std::string key;
    json value;
};

std::vector<Taken> values_of(const HfConfig& hf) {
    std::vector<Taken> v = {
        {"model.arch", hf.model_type},
        {"model.n_layer", hf.num_hidden_layers},
        {"model.n_head", hf.num_attention_heads},
        {"model.n_kv_head", hf.num_key_value_heads},
        {"model.d_model", hf.hidden_size},
        {"model.d_ff", hf.intermediate_size},
        {"model.head_dim", hf.head_dim},
        {"model.vocab_size", hf.vocab_size},
        {"model.tie_embeddings", hf.tie_word_embeddings},
        {"model.norm_eps", hf.norm_eps},
    };
    if (hf.model_type == "llama") {
        v.push_back({"model.rope_theta", hf.rope_theta});
        v.push_back({"model.rope_scaling.type", hf.rope_type});
        if (hf.rope_type == "llama3") {
            v.push_back({"model.rope_scaling.factor", hf.rope_factor});
            v.push_back({"model.rope_scaling.low_freq_factor", hf.rope_low_freq_factor});
            v.push_back({"model.rope_scaling.high_freq_factor", hf.rope_high_freq_factor});
            v.push_back({"model.rope_scaling.original_max_position_embeddings", hf.rope_original_max_position_embeddings});
        }
    }
    return v;
}

// Floats are compared in float, the precision the model uses (1e-05 in JSON is 1e-5f in the YAML).
bool same(const json& a, const json& b) {
    if (a.is_number_float() || b.is_number_float()) return a.get<float>() == b.get<float>();
    return a == b;
}

std::string shown(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

std::string in_where(const std::string& where) {
    return where.rfind("--set", 0) == 0 ? "(" + where + ")" : "in " + where;
}

// A float as the decimal it was written as (1e-5f -> 1e-05, not 9.999999747378752e-06): fmt prints the
// shortest decimal that reads back as the same float.
double decimal(float f) { return std::stod(fmt::format("{}", f)); }

bool in_range(const config::FieldSpec& f, double x) {
    return (f.min_exclusive ? x > f.min : x >= f.min) && x <= f.max;
}

}  // namespace

void apply_hf_config(config::Config& cfg, const HfConfig& hf) {
    std::vector<std::string> problems;
    std::map<std::string, std::string> origins;
    auto field = [&](const std::string& key) {
        auto it = hf.field_of.find(key);
        return it == hf.field_of.end() ? key : it->second;
    };
    auto from_file = [&](const std::string& key) { return fmt::format("{} in {}", field(key), hf.path); };
    for (const auto& [key, value] : values_of(hf)) {
        const auto ptr = config::schema_pointer(key);
        const config::FieldSpec* spec = config::find_field(key);
        if (cfg.wrote(key)) {
            const json& mine = cfg.resolved.at(ptr);
            if (!same(json(mine), value))
                problems.push_back(fmt::format("{}: {} {} but {}: {} in {}", key, shown(mine),
                                               in_where(cfg.written.at(key)), field(key), shown(value), hf.path));
            continue;
        }
        if (value.is_number() && spec && !in_range(*spec, value.get<double>())) {
            problems.push_back(fmt::format("{}: {} from {} is out of range (expected {})", key, shown(value),
                                           from_file(key), config::describe_expected(*spec)));
            continue;
        }
        cfg.resolved[ptr] = value;
        origins[key] = from_file(key);
    }
    // The training context: any length the positions cover (RoPE extrapolates, but we do not train past
    // what the model was built for; GPT-2's position table has exactly this many rows).
    const std::string bs = "model.block_size";
    if (cfg.wrote(bs)) {
        const int64_t mine = cfg.resolved.at(config::schema_pointer(bs)).get<int64_t>();
        if (mine > hf.max_position_embeddings)
            problems.push_back(fmt::format("{}: {} {} but {}: {} in {}; the training context may be at most that", bs,
                                           mine, in_where(cfg.written.at(bs)), field(bs), hf.max_position_embeddings,
                                           hf.path));
    } else if (!in_range(*config::find_field(bs), hf.max_position_embeddings)) {
        problems.push_back(fmt::format("{}: {} from {} is out of range (expected {}); write model.block_size", bs,
                                       hf.max_position_embeddings, from_file(bs),
                                       config::describe_expected(*config::find_field(bs))));
    } else {
        cfg.resolved[config::schema_pointer(bs)] = hf.max_position_embeddings;
        origins[bs] = from_file(bs);
    }
    if (!problems.empty()) {
        std::string msg = fmt::format("model.init_from: the config and {} disagree ({} problem{}):", hf.path,
                                      problems.size(), problems.size() == 1 ? "" : "s");
        for (const auto& p : problems) msg += "\n  " + p;
        msg += "\nhint: remove the key from the config to take config.json's value";
        throw ConfigError(msg);
    }
    config::recheck_model_section(cfg, origins);
}

nlohmann::json hf_config_json(const config::ModelConfig& m, const HfExportInfo& info) {
    auto ids = [](const std::vector<int64_t>& v) -> json {
        if (v.empty()) return nullptr;
        if (v.size() == 1) return v[0];
        return v;
    };
    const int max_pos = info.max_position_embeddings > 0 ? info.max_position_embeddings : m.block_size;
    json j;  // nlohmann::json sorts keys, as transformers' to_json_string(sort_keys=True) does
    j["bos_token_id"] = ids(info.bos_token_id);
    j["eos_token_id"] = ids(info.eos_token_id);
    j["pad_token_id"] = ids(info.pad_token_id);
    j["vocab_size"] = m.vocab_size;
    j["tie_word_embeddings"] = m.tie_embeddings;
    j["initializer_range"] = 0.02;
    j["dtype"] = info.dtype;        // transformers 5.x
    j["torch_dtype"] = info.dtype;  // 4.x (5.x reads it as dtype)
    if (m.arch == "llama") {
        j["architectures"] = {"LlamaForCausalLM"};
        j["model_type"] = "llama";
        j["hidden_size"] = m.d_model;
        j["intermediate_size"] = m.d_ff;
        j["num_hidden_layers"] = m.n_layer;
        j["num_attention_heads"] = m.n_head;
        j["num_key_value_heads"] = m.n_kv_head;
        j["head_dim"] = m.head_dim;
        j["hidden_act"] = "silu";
        j["max_position_embeddings"] = max_pos;
        j["rms_norm_eps"] = decimal(m.norm_eps);
        j["attention_bias"] = false;
        j["attention_dropout"] = 0.0;
        j["mlp_bias"] = false;
        j["pretraining_tp"] = 1;
        j["use_cache"] = true;
        json params = {{"rope_type", "default"}, {"rope_theta", decimal(m.rope_theta)}};
        json legacy = nullptr;
        if (m.rope_scaling.type == "llama3") {
            legacy = {{"rope_type", "llama3"},
                      {"factor", m.rope_scaling.factor},
                      {"low_freq_factor", m.rope_scaling.low_freq_factor},
                      {"high_freq_factor", m.rope_scaling.high_freq_factor},
                      {"original_max_position_embeddings", m.rope_scaling.original_max_position_embeddings}};
            params = legacy;
            params["rope_theta"] = decimal(m.rope_theta);
        }
        j["rope_parameters"] = params;  // 5.x
        j["rope_theta"] = decimal(m.rope_theta);  // 4.x; 5.x folds it into rope_parameters (the same value)
        j["rope_scaling"] = legacy;      // 4.x; 5.x prefers it to rope_parameters (the same values)
    } else if (m.arch == "gpt2") {
        j["architectures"] = {"GPT2LMHeadModel"};
        j["model_type"] = "gpt2";
        j["n_embd"] = m.d_model;
        j["n_layer"] = m.n_layer;
        j["n_head"] = m.n_head;
        j["n_inner"] = m.d_ff;
        j["n_positions"] = max_pos;
        j["n_ctx"] = max_pos;
        j["activation_function"] = "gelu_new";
        j["layer_norm_epsilon"] = decimal(m.norm_eps);
        j["resid_pdrop"] = 0.0;
        j["embd_pdrop"] = 0.0;
        j["attn_pdrop"] = 0.0;
    } else {
        throw InputError(fmt::format("model.arch: {} has no Hugging Face config.json (expected llama or gpt2)", m.arch));
    }
    return j;
}

nlohmann::json hf_generation_config_json(const HfExportInfo& info) {
    json j = {{"_from_model_config", true}};
    auto put = [&](const char* k, const std::vector<int64_t>& v) {
        if (v.size() == 1) j[k] = v[0];
        if (v.size() > 1) j[k] = v;
    };
    put("bos_token_id", info.bos_token_id);
    put("eos_token_id", info.eos_token_id);
    put("pad_token_id", info.pad_token_id);
    return j;
}

}  // namespace llmt::models
