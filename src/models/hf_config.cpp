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
#include "models/arch.h"
#include "models/hf_fields.h"

namespace llmt::models {

using nlohmann::json;

HfConfig parse_hf_config(std::string_view text, const std::string& path) {
    const json j = parse_json(text, path, JsonLimits{.max_bytes = std::size_t{1} << 20, .max_depth = 16});
    if (!j.is_object()) throw FormatError(fmt::format("{}: expected a JSON object (a model config.json)", path));
    const HfFields f(j, path);
    HfConfig c;
    c.path = path;
    if (!f.has("model_type")) f.fail("model_type", fmt::format("missing (expected {})", hf_model_types_listed()));
    c.model_type = f.string_or("model_type", "");
    const ArchSpec* spec = arch_for_model_type(c.model_type);
    if (!spec)
        f.fail("model_type",
               fmt::format("{} is not supported (expected {})", f.found("model_type"), hf_model_types_listed()));
    c.arch = spec->name();
    spec->read_hf_config(j, path, c);
    c.field_of["model.arch"] = "model_type";
    c.bos_token_id = f.token_ids("bos_token_id");
    c.eos_token_id = f.token_ids("eos_token_id");
    if (!f.has("bos_token_id")) c.bos_token_id = c.default_bos_token_id;
    if (!f.has("eos_token_id")) c.eos_token_id = c.default_eos_token_id;
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
        {"model.arch", hf.arch},
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
    for (const auto& [key, value] : hf.family_values) v.push_back({key, value});
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
    const ArchSpec& spec = arch_spec(m.arch);
    if (!spec.write_hf_config)
        throw InputError(fmt::format("model.arch: {} has no Hugging Face config.json (expected {})", m.arch,
                                     hf_model_types_listed()));
    j["architectures"] = {spec.hf_class};
    j["model_type"] = spec.model_types.front();
    spec.write_hf_config(m, info, max_pos, j);
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
