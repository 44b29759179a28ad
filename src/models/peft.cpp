#include "models/peft.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "config/config.h"
#include "config/schema.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/json_parse.h"
#include "core/safetensors.h"
#include "core/sha256.h"
#include "models/hf_adapter.h"

namespace llmt::models {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// target_modules as PEFT writes it: the regex string as given, else the adapted modules' last names.
json target_modules_json(const LoraAdapters& lora) {
    const auto& t = lora.spec().target_modules;
    if (t.size() == 1 && t[0] != "all-linear" && t[0].find_first_of("\\.*+?[](){}|^$") != std::string::npos)
        return t[0];
    std::vector<std::string> names;
    for (const auto& m : lora.modules()) {
        std::string n = m.substr(m.rfind('.') + 1);
        if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    }
    std::sort(names.begin(), names.end());
    return names;
}

// The adapter_config.json fields that change what an adapter computes and that we do not run.
void refuse_unsupported(const json& c, const std::string& path) {
    auto refuse = [&](const char* field, const std::string& why) {
        throw InputError(fmt::format("lora.init_from: {}: \"{}\" {}; llmtrain runs plain LoRA adapters (docs/lora.md)",
                                     path, field, why));
    };
    if (c.value("peft_type", std::string("LORA")) != "LORA") refuse("peft_type", "is not LORA");
    if (c.contains("bias") && c["bias"] != "none") refuse("bias", "is not \"none\"");
    if (c.value("use_dora", false)) refuse("use_dora", "is true (DoRA)");
    for (const char* f : {"rank_pattern", "alpha_pattern"})
        if (c.contains(f) && c[f].is_object() && !c[f].empty()) refuse(f, "sets per-module ranks or alphas");
    for (const char* f : {"layers_to_transform", "modules_to_save", "layer_replication"})
        if (c.contains(f) && !c[f].is_null() && !(c[f].is_array() && c[f].empty())) refuse(f, "is set");
}

}  // namespace

ordered_json peft_adapter_config(const Model& model, const std::string& base) {
    const LoraAdapters* lora = model.lora();
    LLMT_INTERNAL_CHECK(lora != nullptr, "peft: the model has no adapters");
    ordered_json c;
    c["alpha_pattern"] = json::object();
    c["auto_mapping"] = nullptr;
    c["base_model_name_or_path"] = base.empty() ? json(nullptr) : json(base);
    c["bias"] = "none";
    // Weights HF stores (in, out) (GPT-2's Conv1D), as PEFT sets it for such models.
    bool fan_in_fan_out = false;
    for (const ParamSpec& s : model.base().specs()) fan_in_fan_out |= s.hf_transposed;
    c["fan_in_fan_out"] = fan_in_fan_out;
    c["inference_mode"] = true;
    c["init_lora_weights"] = true;
    c["layers_pattern"] = nullptr;
    c["layers_to_transform"] = nullptr;
    c["lora_alpha"] = lora->spec().alpha;
    c["lora_dropout"] = lora->spec().dropout;
    c["modules_to_save"] = nullptr;
    c["peft_type"] = "LORA";
    c["r"] = lora->spec().r;
    c["rank_pattern"] = json::object();
    c["revision"] = nullptr;
    c["target_modules"] = target_modules_json(*lora);
    c["task_type"] = "CAUSAL_LM";
    c["use_dora"] = false;
    c["use_rslora"] = lora->spec().rslora;
    return c;
}

void prepare_lora_init_from(config::Config& cfg) {
    if (cfg.lora.init_from.empty()) return;
    const std::filesystem::path dir = cfg.lora.init_from;
    const std::filesystem::path path = dir / kAdapterConfigFile;
    if (!std::filesystem::is_regular_file(path))
        throw InputError(fmt::format("lora.init_from: '{}' has no {} (expected a PEFT adapter directory)",
                                     dir.string(), kAdapterConfigFile));
    const json c = parse_json(read_file(path, 1 << 20), path.string());
    if (!c.is_object()) throw InputError(fmt::format("lora.init_from: {}: expected a JSON object", path.string()));
    refuse_unsupported(c, path.string());
    std::vector<std::string> problems;
    auto take = [&](const std::string& key, const char* field, auto expect_type) {
        if (!c.contains(field)) {
            problems.push_back(fmt::format("{}: \"{}\" is missing", key, field));
            return;
        }
        json v = c[field];
        using T = decltype(expect_type);
        if constexpr (std::is_same_v<T, bool>) {
            if (!v.is_boolean()) return problems.push_back(fmt::format("\"{}\": expected true or false", field));
        } else if constexpr (std::is_same_v<T, int>) {
            if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 65536)
                return problems.push_back(fmt::format("\"{}\": expected an integer rank in 1..65536", field));
        } else if constexpr (std::is_same_v<T, double>) {
            if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
                return problems.push_back(fmt::format("\"{}\": expected a positive number", field));
        } else {  // target_modules: a list of names or one regex string
            if (v.is_string()) v = json::array({v});
            if (!v.is_array() || v.empty() ||
                !std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_string(); }))
                return problems.push_back(fmt::format("\"{}\": expected a list of module names or a regex", field));
        }
        const auto ptr = config::schema_pointer(key);
        if (cfg.wrote(key)) {
            json mine = cfg.resolved.at(ptr);
            const bool same = v.is_number() && mine.is_number() ? v.get<double>() == mine.get<double>() : v == mine;
            if (!same)
                problems.push_back(fmt::format("{}: {} in the config but \"{}\": {} in {}", key, mine.dump(), field,
                                               v.dump(), path.string()));
            return;
        }
        cfg.resolved[ptr] = v;
    };
    take("lora.r", "r", int{});
    take("lora.alpha", "lora_alpha", double{});
    take("lora.target_modules", "target_modules", std::string{});
    if (c.contains("use_rslora")) take("lora.use_rslora", "use_rslora", bool{});
    if (!problems.empty()) {
        std::string msg = fmt::format("lora.init_from: the config and {} disagree ({} problem{}):", path.string(),
                                      problems.size(), problems.size() == 1 ? "" : "s");
        for (const auto& p : problems) msg += "\n  " + p;
        throw ConfigError(msg + "\nhint: remove the key from the config to take the adapter's value");
    }
    cfg.lora.r = cfg.resolved.at(config::schema_pointer("lora.r")).get<int>();
    cfg.lora.alpha = cfg.resolved.at(config::schema_pointer("lora.alpha")).get<double>();
    cfg.lora.target_modules =
        cfg.resolved.at(config::schema_pointer("lora.target_modules")).get<std::vector<std::string>>();
    cfg.lora.use_rslora = cfg.resolved.at(config::schema_pointer("lora.use_rslora")).get<bool>();
}

json lora_base_identity(const config::Config& cfg, const std::filesystem::path& weights) {
    if (weights.empty()) return {{"init_from", "scratch"}, {"seed", cfg.run.seed}};
    namespace fs = std::filesystem;
    const fs::path dir = fs::is_directory(weights) ? weights : weights.parent_path();
    std::vector<fs::path> files;
    if (fs::is_directory(weights)) {
        for (const auto& e : fs::directory_iterator(dir))
            if (e.is_regular_file() && e.path().extension() == ".safetensors") files.push_back(e.path());
    } else {
        files.push_back(weights);
    }
    if (fs::is_regular_file(dir / "config.json")) files.push_back(dir / "config.json");
    std::sort(files.begin(), files.end());
    std::string all;
    for (const auto& f : files) all += f.filename().string() + " " + sha256_file(f) + "\n";
    return {{"init_from", fs::absolute(weights).lexically_normal().string()}, {"sha256", sha256_hex(all)}};
}

void check_lora_base(const json& recorded, const json& current, const std::string& checkpoint) {
    // The content decides (a base directory may move); the path is there for the message.
    auto key = [](const json& j) { return j.contains("sha256") ? j["sha256"] : j.value("seed", json()); };
    if (recorded.is_object() && recorded.value("init_from", "") == "scratch" &&
                current.value("init_from", "") == "scratch"
            ? key(recorded) == key(current)
            : recorded.is_object() && recorded.contains("sha256") && key(recorded) == key(current))
        return;
    throw CheckpointError(fmt::format(
        "'{}' holds LoRA adapters trained on another base model: recorded {}, this run's base {} (hint: set "
        "model.init_from to the base the adapters were trained on)",
        checkpoint, recorded.dump(), current.dump()));
}

void load_peft_adapter(Model& model, const std::filesystem::path& dir) {
    LLMT_INTERNAL_CHECK(model.lora() != nullptr, "peft: the model has no adapters to load into");
    const std::filesystem::path path = dir / kAdapterWeightsFile;
    if (!std::filesystem::is_regular_file(path))
        throw InputError(fmt::format("lora.init_from: '{}' has no {}", dir.string(), kAdapterWeightsFile));
    const SafetensorsFile file = SafetensorsFile::open(path);
    load_trained_params(model, SafetensorsSource(file));
}

void write_peft_adapter(const Model& model, const std::filesystem::path& dir, const std::string& base) {
    LLMT_INTERNAL_CHECK(model.lora() != nullptr, "peft: the model has no adapters");
    std::filesystem::create_directories(dir);
    const Arena host = host_f32_copy(model.trained());
    std::vector<std::vector<float>> scratch;
    write_safetensors(dir / kAdapterWeightsFile, hf_tensors(model.param_specs(), host, scratch), {{"format", "pt"}});
    write_file_atomic(dir / kAdapterConfigFile, peft_adapter_config(model, base).dump(2) + "\n");
}

}  // namespace llmt::models
