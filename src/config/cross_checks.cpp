// The loader's checks of a resolved config that read more than one key or depend on the architecture,
// the data source or the device: derived model defaults and their per-family checks, the run names, the
// optimizer's and data source's unread keys, URIs, ZeRO stages. They run on what loader.cpp parsed, walked
// and typed; every problem goes to the Validator with where the key was written.
#include "config/cross_checks.h"

#include <fmt/format.h>

#include <regex>
#include <string>

#include "config/arch_table.h"
#include "config/classifier_checks.h"
#include "config/data_checks.h"
#include "config/schema.h"
#include "core/fs.h"

namespace llmt::config {

using nlohmann::ordered_json;

namespace {

int64_t as_i(const ordered_json& j) { return j.get<int64_t>(); }

// The resolved value at "section.key".
const ordered_json& value_at(const ordered_json& r, const std::string& path) { return r.at(schema_pointer(path)); }

bool is_default(const ordered_json& r, const std::string& path) {
    return value_at(r, path) == find_field(path)->default_value;
}

// tracking.mlflow.uri: the schemes this version speaks (MLflow itself knows more: databricks, a SQL
// database); an empty value is checked when the run starts, against $MLFLOW_TRACKING_URI.
void check_mlflow_uri(const ordered_json& r, const std::function<std::string(const std::string&)>& at, Validator& v) {
    const std::string uri = value_at(r, "tracking.mlflow.uri");
    if (uri.empty() || local_path_of_uri(uri) || uri.rfind("http://", 0) == 0 || uri.rfind("https://", 0) == 0) return;
    v.add("tracking.mlflow.uri", at("tracking.mlflow.uri"),
          fmt::format("expected a directory, a file: URI (an MLflow file store) or an http(s):// URL (an MLflow "
                      "tracking server), found \"{}\"{}",
                      uri.substr(0, 200),
                      uri.rfind("file://", 0) == 0
                          ? " (a file:// URI names this machine: file:///path or file://localhost/path)"
                          : ": this version speaks no other scheme"));
}

// output.sync: empty (off) or s3://bucket[/prefix] (docs/object_storage.md); bucket names as S3 allows them.
void check_sync_uri(const ordered_json& r, const std::function<std::string(const std::string&)>& at, Validator& v) {
    const std::string uri = value_at(r, "output.sync");
    if (uri.empty()) return;
    bool ok = uri.rfind("s3://", 0) == 0 && uri.size() > 5;
    const std::string bucket = ok ? uri.substr(5, uri.find('/', 5) - 5) : "";
    ok = ok && bucket.size() >= 3 && bucket.size() <= 63 && uri.find("//", 5) == std::string::npos &&
         uri.find("..") == std::string::npos &&
         bucket.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789.-") == std::string::npos;
    if (!ok)
        v.add("output.sync", at("output.sync"),
              fmt::format("expected s3://bucket/prefix (a bucket of 3-63 characters of a-z, 0-9, '.' and '-'; no "
                          "empty or '..' segment), found \"{}\"; this version syncs to S3-compatible stores only",
                          uri.substr(0, 200)));
}

// run.deterministic: CPU runs are bit-reproducible (fixed thread partitions and reduction orders in every
// CPU kernel); the CUDA kernels are not (float atomics in the LayerNorm, bias, embedding and attention
// backward passes, and cuBLASLt picks its GEMM algorithm by timing), so true on CUDA is refused.
void check_deterministic(const ordered_json& r, const std::function<std::string(const std::string&)>& at,
                         Validator& v) {
    if (value_at(r, "run.deterministic").get<bool>() && value_at(r, "run.device") == "cuda")
        v.add("run.deterministic", at("run.deterministic"),
              "true cannot be honoured with run.device: cuda (the GPU kernels accumulate with float atomics "
              "and cuBLASLt chooses GEMM algorithms by timing); use run.device: cpu for bit-reproducible runs, "
              "or run.deterministic: false");
}

// The hyper-parameters of the optimizer not chosen (trainer.optimizer) would be silently ignored: a
// non-default value is refused, naming the key. Nesterov momentum needs momentum and no dampening (as
// torch.optim.SGD requires).
void check_optimizer_keys(const ordered_json& r, const std::function<std::string(const std::string&)>& at,
                          Validator& v) {
    const std::string opt = value_at(r, "trainer.optimizer");
    const std::vector<std::string> adamw_keys = {"trainer.betas", "trainer.eps"};
    const std::vector<std::string> sgd_keys = {"trainer.momentum", "trainer.dampening", "trainer.nesterov"};
    for (const std::string& key : opt == "sgd" ? adamw_keys : sgd_keys)
        if (!is_default(r, key))
            v.add(key, at(key),
                  fmt::format("is read only with trainer.optimizer {}, and trainer.optimizer is {}; remove it "
                              "(default {}) or set trainer.optimizer: {}",
                              opt == "sgd" ? "adamw" : "sgd", opt, find_field(key)->default_value.dump(),
                              opt == "sgd" ? "adamw" : "sgd"));
    if (opt == "sgd" && value_at(r, "trainer.nesterov").get<bool>() &&
        (value_at(r, "trainer.momentum").get<double>() <= 0 || value_at(r, "trainer.dampening").get<double>() != 0))
        v.add("trainer.nesterov", at("trainer.nesterov"),
              fmt::format("Nesterov momentum needs trainer.momentum > 0 and trainer.dampening 0, found momentum {} "
                          "and dampening {}",
                          value_at(r, "trainer.momentum").get<double>(),
                          value_at(r, "trainer.dampening").get<double>()));
}

// data.* keys that the configured source never reads: a non-default value would be silently ignored.
void check_data_keys_read(const ordered_json& r, const std::function<std::string(const std::string&)>& at,
                          Validator& v) {
    const std::string source = value_at(r, "data.source");
    for (const auto& [key, readers] : unread_data_keys(source, value_at(r, "trainer.precision").get<std::string>()))
        if (!is_default(r, key))
            v.add(key, at(key),
                  fmt::format("is read only with data.source {}, and data.source is {}; remove it (or change "
                              "data.source)",
                              readers, source));
}

// model.rope_scaling: its llama3 keys only with type llama3, whose ramp divides by (high - low).
void check_rope_scaling(const ordered_json& r, const std::function<std::string(const std::string&)>& at,
                        Validator& v) {
    static const char* kLlama3Keys[] = {"model.rope_scaling.factor", "model.rope_scaling.low_freq_factor",
                                        "model.rope_scaling.high_freq_factor",
                                        "model.rope_scaling.original_max_position_embeddings"};
    if (value_at(r, "model.rope_scaling.type") != "llama3") {
        for (const char* key : kLlama3Keys)
            if (!is_default(r, key))
                v.add(key, at(key),
                      fmt::format("is read only with model.rope_scaling.type llama3, and the type is {}; remove it "
                                  "(default {}) or set model.rope_scaling.type: llama3",
                                  value_at(r, "model.rope_scaling.type").get<std::string>(),
                                  find_field(key)->default_value.dump()));
    } else if (value_at(r, "model.rope_scaling.high_freq_factor").get<double>() <=
               value_at(r, "model.rope_scaling.low_freq_factor").get<double>()) {
        // The llama3 ramp divides by (high - low).
        v.add("model.rope_scaling.high_freq_factor", at("model.rope_scaling.high_freq_factor"),
              fmt::format("must be > model.rope_scaling.low_freq_factor ({}), found {}",
                          value_at(r, "model.rope_scaling.low_freq_factor").get<double>(),
                          value_at(r, "model.rope_scaling.high_freq_factor").get<double>()));
    }
}

// dist.zero_stage: 2 is not built; 3 (ZeRO-3, train/zero3_state.h) shards the units of the decoder-only
// transformers: not an image classifier.
void zero_stage_checks(const ordered_json& r, const std::function<std::string(const std::string&)>& at, Validator& v) {
    const int stage = r["dist"]["zero_stage"].get<int>();
    if (stage == 2)
        v.add("dist.zero_stage", at("dist.zero_stage"),
              "2 is not built: use 1 (optimizer state and fp32 masters sharded) or 3 (parameters, gradients and "
              "optimizer state sharded per layer)");
    if (stage != 3) return;
    const std::string arch = r["model"]["arch"].get<std::string>();
    if (is_classifier_arch(arch))
        v.add("dist.zero_stage", at("dist.zero_stage"),
              fmt::format("3 shards the layers of the language models; model.arch {} is an image classifier (use "
                          "dist.zero_stage 0 or 1)", arch));
}

}  // namespace

// Where a key's value came from (file:line:col, --set, or the default), for messages.
std::function<std::string(const std::string&)> locator(const std::map<std::string, std::string>& loc,
                                                       const Validator& v) {
    return [&loc, &v](const std::string& path) -> std::string {
        auto it = loc.find(path);
        return it == loc.end() ? v.source() + " (default)" : it->second;
    };
}

// The lora.* keys other than lora.r act only with an adapter: written with lora.r 0 they would be ignored,
// so they are refused, naming the key.
void refuse_lora_keys_without_adapters(const ordered_json& r, const std::function<std::string(const std::string&)>& at,
                          Validator& v) {
    if (as_i(value_at(r, "lora.r")) > 0) return;
    for (const char* key : {"lora.alpha", "lora.dropout", "lora.target_modules", "lora.use_rslora", "lora.init_from"})
        if (!is_default(r, key))
            v.add(key, at(key),
                  fmt::format("has no effect without adapters (lora.r is 0); set lora.r or remove it (default {})",
                              find_field(key)->default_value.dump()));
}

// The model section: derived defaults (a null value), then the cross-field and per-architecture checks.
// Run by the loader, and again after a Hugging Face config.json changed model keys (recheck_model_section).
void model_checks(ordered_json& r, const std::function<std::string(const std::string&)>& at, Validator& v) {
    auto& m = r["model"];
    if (m["n_kv_head"].is_null()) m["n_kv_head"] = m["n_head"];
    if (m["d_ff"].is_null()) m["d_ff"] = 4 * as_i(m["d_model"]);
    if (m["head_dim"].is_null()) m["head_dim"] = as_i(m["d_model"]) / as_i(m["n_head"]);
    const std::string arch = m["arch"];

    // transformers requires this of LlamaConfig too (validate_architecture), even with another head_dim.
    if (as_i(m["d_model"]) % as_i(m["n_head"]) != 0)
        v.add("model.d_model", at("model.d_model"),
              fmt::format("must be divisible by model.n_head ({} % {} = {})", as_i(m["d_model"]), as_i(m["n_head"]),
                          as_i(m["d_model"]) % as_i(m["n_head"])));
    if (as_i(m["n_head"]) % as_i(m["n_kv_head"]) != 0)
        v.add("model.n_kv_head", at("model.n_kv_head"),
              fmt::format("model.n_head ({}) must be a multiple of model.n_kv_head ({})", as_i(m["n_head"]),
                          as_i(m["n_kv_head"])));
    const ArchEntry* family = find_arch(arch);
    if (family && !family->grouped_query) {
        if (as_i(m["n_kv_head"]) != as_i(m["n_head"]))
            v.add("model.n_kv_head", at("model.n_kv_head"),
                  fmt::format("{} uses full multi-head attention: must equal model.n_head ({})", arch,
                              as_i(m["n_head"])));
        // (An indivisible d_model is reported above; the derived head_dim would only repeat it.)
        if (as_i(m["d_model"]) % as_i(m["n_head"]) == 0 &&
            as_i(m["head_dim"]) * as_i(m["n_head"]) != as_i(m["d_model"]))
            v.add(
                "model.head_dim", at("model.head_dim"),
                fmt::format("{} heads split model.d_model: must be model.d_model / model.n_head ({}), found {}", arch,
                            as_i(m["d_model"]) / std::max<int64_t>(1, as_i(m["n_head"])), as_i(m["head_dim"])));
    }
    // A key of another family's section would be silently ignored (only among families of this kind: the
    // classifier checks name what the other kind reads).
    for (const std::string& key : family_keys()) {
        if (!family || family->reads(key) || is_default(r, key)) continue;
        bool same_kind = false;
        for (const ArchEntry& e : arch_table()) same_kind |= e.kind == family->kind && e.reads(key);
        if (same_kind)
            v.add(key, at(key),
                  fmt::format("is read only with model.arch {}, and model.arch is {}; remove it (default {})",
                              families_reading(key), arch, find_field(key)->default_value.dump()));
    }
    // RoPE needs pairs of channels.
    if (family && family->rotary_positions && as_i(m["head_dim"]) % 2 != 0)
        v.add("model.head_dim", at("model.head_dim"),
              fmt::format("RoPE rotates pairs of channels: must be even, found {}", as_i(m["head_dim"])));
    // The llama3 keys under a family with the RoPE section (the family-key check above names them under
    // any other).
    if (family && family->reads("model.rope_scaling.type")) check_rope_scaling(r, at, v);
}

void cross_checks(ordered_json& r, const std::map<std::string, std::string>& loc, Validator& v, ConfigUse use) {
    const auto at = locator(loc, v);
    auto& t = r["trainer"];
    model_checks(r, at, v);
    for (const auto& p : classifier_problems(r, use == ConfigUse::kTraining)) v.add(p.key, at(p.key), p.message);
    // trainer.min_lr unwritten: a tenth of trainer.lr (as nanoGPT, the Chinchilla runs and our presets decay).
    if (t["min_lr"].is_null()) t["min_lr"] = 0.1 * t["lr"].get<double>();
    if (t["min_lr"].get<double>() > t["lr"].get<double>())
        v.add("trainer.min_lr", at("trainer.min_lr"),
              fmt::format("must be <= trainer.lr ({}), found {}", t["lr"].get<double>(), t["min_lr"].get<double>()));
    zero_stage_checks(r, at, v);
    if (r["dist"]["backend"] == "nccl" && r["run"]["device"] != "cuda")
        v.add(
            "dist.backend", at("dist.backend"),
            fmt::format("nccl needs run.device: cuda (found run.device: {})", r["run"]["device"].get<std::string>()));
    if (use == ConfigUse::kTraining)
        for (const auto& p : training_data_problems(r)) v.add(p.key, at(p.located_at), p.message);
    static const std::regex kName("^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$");
    for (const char* key : {"run.name", "output.run_id"}) {
        auto dot = std::string(key).find('.');
        std::string s = r[std::string(key).substr(0, dot)][std::string(key).substr(dot + 1)];
        if (std::string(key) == "output.run_id" && s.empty()) continue;
        if (!std::regex_match(s, kName) || s.find("..") != std::string::npos)
            v.add(key, at(key),
                  fmt::format("expected 1-63 characters of letters, digits, '_', '.', '-' starting with a letter or "
                              "digit (it names a directory), found {}",
                              s.size() <= 64 ? "\"" + s + "\"" : fmt::format("a value of {} bytes", s.size())));
    }
    if (r["output"]["root_dir"].get<std::string>().empty())
        v.add("output.root_dir", at("output.root_dir"), "must not be empty");
    check_deterministic(r, at, v);
    check_data_keys_read(r, at, v);
    check_optimizer_keys(r, at, v);
    check_mlflow_uri(r, at, v);
    check_sync_uri(r, at, v);
}

}  // namespace llmt::config
