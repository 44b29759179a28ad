// models/hf_config.h: config.json of both transformers generations (4.x rope_theta/rope_scaling/
// torch_dtype; 5.x rope_parameters/dtype) for llama and gpt2, the refusals, the merge into a config
// (unwritten keys taken, written ones compared, naming both sides) and the config.json we write.
// The field sets are those of the hub's Llama-3.2-1B, TinyLlama-1.1B-Chat-v1.0 and openai-community/gpt2.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "config/config.h"
#include "config/loader.h"
#include "config/schema.h"
#include "core/error.h"
#include "core/fs.h"
#include "models/hf_config.h"
#include "models/hf_resolve.h"

namespace llmt::models {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Llama-3.2-1B's config.json as transformers 4.45 wrote it.
const json kLlama32_4x = json::parse(R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
  "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8, "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256})");

// The same model as transformers 5.x saves it: RoPE in rope_parameters, dtype instead of torch_dtype,
// eos as a list (the Instruct variant's form).
const json kLlama32_5x = json::parse(R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "dtype": "bfloat16", "eos_token_id": [128001, 128008, 128009], "head_dim": 64,
  "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8, "pad_token_id": null,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_parameters": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                      "original_max_position_embeddings": 8192, "rope_theta": 500000.0, "rope_type": "llama3"},
  "tie_word_embeddings": true, "transformers_version": "5.17.0", "use_cache": true, "vocab_size": 128256})");

// TinyLlama-1.1B-Chat-v1.0: no head_dim, rope_scaling null, untied.
const json kTinyLlama = json::parse(R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 2048,
  "initializer_range": 0.02, "intermediate_size": 5632, "max_position_embeddings": 2048,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 22, "num_key_value_heads": 4,
  "pad_token_id": 0, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null,
  "rope_theta": 10000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.35.0", "use_cache": true, "vocab_size": 32000})");

// openai-community/gpt2: no n_inner, no tie_word_embeddings (both transformers' defaults).
const json kGpt2 = json::parse(R"({
  "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
  "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
  "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12,
  "n_layer": 12, "n_positions": 1024, "resid_pdrop": 0.1, "summary_activation": null,
  "summary_first_dropout": 0.1, "summary_proj_to_labels": true, "summary_type": "cls_index",
  "summary_use_proj": true, "task_specific_params": {"text-generation": {"do_sample": true, "max_length": 50}},
  "vocab_size": 50257})");

HfConfig parse(const json& j) { return parse_hf_config(j.dump(), "DIR/config.json"); }

std::string parse_error(const json& j) {
    try {
        parse(j);
    } catch (const FormatError& e) {
        return e.what();
    }
    return "(no error)";
}

void expect_llama32(const HfConfig& c) {
    EXPECT_EQ(c.model_type, "llama");
    EXPECT_EQ(c.hidden_size, 2048);
    EXPECT_EQ(c.num_hidden_layers, 16);
    EXPECT_EQ(c.num_attention_heads, 32);
    EXPECT_EQ(c.num_key_value_heads, 8);
    EXPECT_EQ(c.intermediate_size, 8192);
    EXPECT_EQ(c.head_dim, 64);
    EXPECT_EQ(c.max_position_embeddings, 131072);
    EXPECT_EQ(c.vocab_size, 128256);
    EXPECT_EQ(c.norm_eps, 1e-5);
    EXPECT_TRUE(c.tie_word_embeddings);
    EXPECT_EQ(c.rope.theta, 500000.0);
    EXPECT_EQ(c.rope.scaling.type, "llama3");
    EXPECT_EQ(c.rope.scaling.factor, 32.0);
    EXPECT_EQ(c.rope.scaling.low_freq_factor, 1.0);
    EXPECT_EQ(c.rope.scaling.high_freq_factor, 4.0);
    EXPECT_EQ(c.rope.scaling.original_max_position_embeddings, 8192);
    EXPECT_EQ(c.bos_token_id, std::vector<int64_t>{128000});
    EXPECT_EQ(c.dtype, "bfloat16");
}

TEST(HfConfig, Llama32FromTransformers4) {
    const HfConfig c = parse(kLlama32_4x);
    expect_llama32(c);
    EXPECT_EQ(c.eos_token_id, std::vector<int64_t>{128001});
    EXPECT_EQ(c.field_of.at("model.rope_theta"), "rope_theta");
    EXPECT_EQ(c.field_of.at("model.rope_scaling.factor"), "rope_scaling.factor");
}

TEST(HfConfig, Llama32FromTransformers5) {
    const HfConfig c = parse(kLlama32_5x);
    expect_llama32(c);
    EXPECT_EQ(c.eos_token_id, (std::vector<int64_t>{128001, 128008, 128009}));
    EXPECT_EQ(c.field_of.at("model.rope_theta"), "rope_parameters.rope_theta");
}

TEST(HfConfig, LegacyTypeKeyAndTopLevelOriginalMax) {
    json j = kLlama32_4x;
    j["rope_scaling"].erase("rope_type");
    j["rope_scaling"]["type"] = "llama3";  // the spelling before transformers 4.43
    j["rope_scaling"].erase("original_max_position_embeddings");
    j["original_max_position_embeddings"] = 8192;
    const HfConfig c = parse(j);
    EXPECT_EQ(c.rope.scaling.type, "llama3");
    EXPECT_EQ(c.rope.scaling.original_max_position_embeddings, 8192);
}

TEST(HfConfig, TinyLlamaDefaults) {
    const HfConfig c = parse(kTinyLlama);
    EXPECT_EQ(c.head_dim, 64);  // absent: hidden_size / num_attention_heads
    EXPECT_EQ(c.num_key_value_heads, 4);
    EXPECT_EQ(c.rope.scaling.type, "none");
    EXPECT_EQ(c.rope.theta, 10000.0);
    EXPECT_FALSE(c.tie_word_embeddings);

    json j = kTinyLlama;  // LlamaConfig's defaults for what a file may omit
    for (const char* k : {"num_key_value_heads", "rms_norm_eps", "tie_word_embeddings", "rope_theta", "rope_scaling",
                          "hidden_act"})
        j.erase(k);
    const HfConfig d = parse(j);
    EXPECT_EQ(d.num_key_value_heads, 32);
    EXPECT_EQ(d.norm_eps, 1e-6);
    EXPECT_FALSE(d.tie_word_embeddings);
    EXPECT_EQ(d.rope.theta, 10000.0);
}

TEST(HfConfig, HeadDimMayDifferForLlama) {
    json j = kTinyLlama;
    j["head_dim"] = 128;
    EXPECT_EQ(parse(j).head_dim, 128);
}

TEST(HfConfig, Gpt2Defaults) {
    const HfConfig c = parse(kGpt2);
    EXPECT_EQ(c.model_type, "gpt2");
    EXPECT_EQ(c.hidden_size, 768);
    EXPECT_EQ(c.intermediate_size, 4 * 768);  // n_inner absent
    EXPECT_EQ(c.max_position_embeddings, 1024);
    EXPECT_EQ(c.num_key_value_heads, 12);
    EXPECT_TRUE(c.tie_word_embeddings);  // GPT2Config's default
    EXPECT_EQ(c.norm_eps, 1e-5);
    EXPECT_EQ(c.eos_token_id, std::vector<int64_t>{50256});
    json j = kGpt2;
    j["n_inner"] = nullptr;
    EXPECT_EQ(parse(j).intermediate_size, 3072);
    j["n_inner"] = 1000;
    EXPECT_EQ(parse(j).intermediate_size, 1000);
}

TEST(HfConfig, RefusesWhatWeCannotCompute) {
    auto with = [](json j, const char* k, json v) {
        j[k] = std::move(v);
        return j;
    };
    struct Case {
        json j;
        std::string needle;
    };
    json linear = kLlama32_4x;
    linear["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
    json yarn5 = kLlama32_5x;
    yarn5["rope_parameters"]["rope_type"] = "yarn";
    const std::vector<Case> cases = {
        {with(kTinyLlama, "model_type", "falcon"),
         "`model_type`: \"falcon\" is not supported (expected gpt2, llama, qwen2, qwen3 or mistral)"},
        {with(kTinyLlama, "hidden_act", "gelu"), "`hidden_act`: \"gelu\" is not supported"},
        {with(kTinyLlama, "attention_bias", true), "`attention_bias`: true is not supported"},
        {with(kTinyLlama, "mlp_bias", true), "`mlp_bias`: true is not supported"},
        {linear, "`rope_scaling.rope_type`: \"linear\" is not supported"},
        {yarn5, "`rope_parameters.rope_type`: \"yarn\" is not supported"},
        {with(kGpt2, "activation_function", "relu"), "`activation_function`: \"relu\" is not supported"},
        {with(kGpt2, "scale_attn_by_inverse_layer_idx", true), "`scale_attn_by_inverse_layer_idx`: true"},
        {with(kTinyLlama, "num_key_value_heads", 5),
         "`num_key_value_heads`: num_attention_heads (32) must be a multiple"},
        {with(kTinyLlama, "num_hidden_layers", "22"), "`num_hidden_layers`: expected an integer, found \"22\""},
        {with(kTinyLlama, "num_hidden_layers", 0), "`num_hidden_layers`: expected an integer >= 1"},
        {with(kTinyLlama, "rms_norm_eps", -1), "`rms_norm_eps`: expected a number > 0"},
        {with(kTinyLlama, "tie_word_embeddings", "no"), "`tie_word_embeddings`: expected true or false"},
        {with(kTinyLlama, "eos_token_id", "x"), "`eos_token_id`: expected a token id"},
    };
    for (const auto& c : cases) {
        const std::string e = parse_error(c.j);
        EXPECT_NE(e.find("DIR/config.json: "), std::string::npos) << e;
        EXPECT_NE(e.find(c.needle), std::string::npos) << e;
    }
    json missing = kTinyLlama;
    missing.erase("intermediate_size");
    EXPECT_NE(parse_error(missing).find("`intermediate_size`: missing"), std::string::npos) << parse_error(missing);
    json no_factor = kLlama32_5x;
    no_factor["rope_parameters"].erase("factor");
    EXPECT_NE(parse_error(no_factor).find("`rope_parameters.factor`: missing"), std::string::npos);
    EXPECT_THROW(parse_hf_config("[1, 2]", "x.json"), FormatError);
    EXPECT_THROW(parse_hf_config("{\"model_type\": \"llama\",", "x.json"), FormatError);
}

// ---- the merge into a config ----

const std::string kBase =
    "data: {source: shards, train_shards: t.bin, val_shards: v.bin}\n"
    "model:\n  init_from: DIR\n";

config::Config load(const std::string& extra, const std::vector<std::string>& sets = {}) {
    return config::load_config_string(kBase + extra, "x.yaml", sets);
}

std::string apply_error(config::Config cfg, const HfConfig& hf) {
    try {
        apply_hf_config(cfg, hf);
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "(no error)";
}

TEST(HfConfigApply, UnwrittenKeysAreTakenAndResolvedFollows) {
    config::Config cfg = load("  block_size: 2048\n");
    apply_hf_config(cfg, parse(kLlama32_5x));
    const auto& m = cfg.model;
    EXPECT_EQ(m.arch, "llama");
    EXPECT_EQ(m.n_layer, 16);
    EXPECT_EQ(m.n_head, 32);
    EXPECT_EQ(m.n_kv_head, 8);
    EXPECT_EQ(m.d_model, 2048);
    EXPECT_EQ(m.d_ff, 8192);
    EXPECT_EQ(m.head_dim, 64);
    EXPECT_EQ(m.vocab_size, 128256);
    EXPECT_EQ(m.block_size, 2048);  // written, below max_position_embeddings
    EXPECT_TRUE(m.tie_embeddings);
    EXPECT_EQ(m.norm_eps, 1e-5f);
    EXPECT_EQ(m.rope.theta, 500000.f);
    EXPECT_EQ(m.rope.scaling.type, "llama3");
    EXPECT_EQ(m.rope.scaling.factor, 32.0);
    EXPECT_EQ(m.rope.scaling.original_max_position_embeddings, 8192);
    EXPECT_EQ(m.vocab_pad_multiple, 128);  // ours
    // The resolved JSON (what checkpoints store) says the same, and reloads to the same config.
    EXPECT_EQ(cfg.resolved["model"]["n_layer"], 16);
    EXPECT_EQ(cfg.resolved["model"]["rope_scaling"]["type"], "llama3");
    const config::Config again = config::load_config_string(cfg.resolved.dump(), "again.yaml");
    EXPECT_EQ(again.resolved, cfg.resolved);
}

TEST(HfConfigApply, BlockSizeDefaultsToMaxPositions) {
    config::Config cfg = load("");
    apply_hf_config(cfg, parse(kTinyLlama));
    EXPECT_EQ(cfg.model.block_size, 2048);
    EXPECT_EQ(cfg.model.rope.scaling.type, "none");
    EXPECT_EQ(cfg.model.n_kv_head, 4);
}

TEST(HfConfigApply, WrittenKeysThatAgreeAreFine) {
    config::Config cfg = load("  arch: llama\n  n_layer: 22\n  n_head: 32\n  n_kv_head: 4\n  norm_eps: 1e-5\n"
                              "  tie_embeddings: false\n");
    EXPECT_NO_THROW(apply_hf_config(cfg, parse(kTinyLlama)));
    EXPECT_EQ(cfg.model.n_layer, 22);
}

TEST(HfConfigApply, DisagreementNamesBothSides) {
    const std::string e = apply_error(load("  n_layer: 16\n  tie_embeddings: true\n", {"model.d_model=1536"}),
                                      parse(kTinyLlama));
    EXPECT_NE(e.find("model.n_layer: 16 in x.yaml:4:3 but num_hidden_layers: 22 in DIR/config.json"),
              std::string::npos)
        << e;
    EXPECT_NE(e.find("model.d_model: 1536 (--set model.d_model=1536) but hidden_size: 2048 in DIR/config.json"),
              std::string::npos)
        << e;
    EXPECT_NE(e.find("model.tie_embeddings: true in x.yaml:5:3 but tie_word_embeddings: false"), std::string::npos)
        << e;
    EXPECT_NE(e.find("3 problems"), std::string::npos) << e;
}

TEST(HfConfigApply, ArchAndRopeDisagreements) {
    std::string e = apply_error(load("  arch: gpt2\n"), parse(kTinyLlama));
    EXPECT_NE(e.find("model.arch: gpt2 in x.yaml:4:3 but model_type: llama in DIR/config.json"), std::string::npos)
        << e;
    e = apply_error(load("  arch: llama\n  rope_theta: 10000\n"), parse(kLlama32_5x));
    EXPECT_NE(e.find("model.rope_theta: 10000.0 in x.yaml:5:3 but rope_parameters.rope_theta: 500000.0"),
              std::string::npos)
        << e;
    e = apply_error(load("  arch: llama\n  rope_scaling: {type: llama3, factor: 8}\n"), parse(kLlama32_4x));
    EXPECT_NE(e.find("but rope_scaling.factor: 32.0 in DIR/config.json"), std::string::npos)
        << e;
    // A llama3 key written where config.json has no scaling: refused by the model checks after the merge.
    config::Config cfg = load("  arch: llama\n  rope_scaling: {type: llama3, factor: 32}\n");
    e = apply_error(cfg, parse(kTinyLlama));
    EXPECT_NE(e.find("model.rope_scaling.type: llama3 in x.yaml:5:"), std::string::npos)
        << e;
}

TEST(HfConfigApply, BlockSizeAboveMaxPositionsIsRefused) {
    const std::string e = apply_error(load("  block_size: 4096\n"), parse(kTinyLlama));
    EXPECT_NE(e.find("model.block_size: 4096 in x.yaml:4:3 but max_position_embeddings: 2048 in DIR/config.json"),
              std::string::npos)
        << e;
}

TEST(HfConfigApply, OutOfRangeValuesAreRefusedNamingTheField) {
    json j = kTinyLlama;
    j["num_hidden_layers"] = 5000;  // model.n_layer <= 1024
    const std::string e = apply_error(load(""), parse(j));
    EXPECT_NE(e.find("model.n_layer: 5000 from num_hidden_layers in DIR/config.json is out of range"),
              std::string::npos)
        << e;
}

TEST(HfConfigApply, Gpt2DirectoryKeepsRopeDefaults) {
    config::Config cfg = load("  block_size: 256\n");
    apply_hf_config(cfg, parse(kGpt2));
    EXPECT_EQ(cfg.model.arch, "gpt2");
    EXPECT_EQ(cfg.model.d_ff, 3072);
    EXPECT_EQ(cfg.model.block_size, 256);
    EXPECT_EQ(cfg.model.rope.scaling.type, "none");
    EXPECT_FALSE(cfg.wrote("model.arch"));
}

// ---- what we write ----

HfExportInfo export_info(std::string dtype, int max_pos, std::vector<int64_t> bos, std::vector<int64_t> eos) {
    HfExportInfo i;
    i.dtype = std::move(dtype);
    i.max_position_embeddings = max_pos;
    i.bos_token_id = std::move(bos);
    i.eos_token_id = std::move(eos);
    return i;
}

config::ModelConfig llama_model() {
    config::Config cfg = load("");
    apply_hf_config(cfg, parse(kLlama32_4x));
    return cfg.model;
}

TEST(HfConfigWrite, LlamaReadsBackTheSame) {
    const config::ModelConfig m = llama_model();
    const HfExportInfo info = export_info("bfloat16", 131072, {128000}, {128001, 128009});
    const json j = hf_config_json(m, info);
    EXPECT_EQ(j["rms_norm_eps"].dump(), "1e-05");  // the decimal, not 9.999999747378752e-06
    EXPECT_EQ(j["rope_parameters"]["rope_theta"], 500000.0);
    EXPECT_EQ(j["rope_parameters"]["rope_type"], "llama3");
    EXPECT_EQ(j["rope_scaling"]["rope_type"], "llama3");  // 4.x
    EXPECT_FALSE(j["rope_scaling"].contains("rope_theta"));  // 4.x validation warns about unknown keys
    EXPECT_EQ(j["dtype"], "bfloat16");
    EXPECT_EQ(j["torch_dtype"], "bfloat16");
    const HfConfig back = parse(j);
    expect_llama32(back);
    EXPECT_EQ(back.eos_token_id, (std::vector<int64_t>{128001, 128009}));
    // Read as 5.x reads it (rope_parameters only) and as 4.x does (rope_theta + rope_scaling only).
    json only5 = j, only4 = j;
    only5.erase("rope_scaling");
    only5.erase("rope_theta");
    only4.erase("rope_parameters");
    expect_llama32(parse(only5));
    expect_llama32(parse(only4));
}

TEST(HfConfigWrite, LlamaWithoutScalingAndGpt2) {
    config::Config cfg = load("");
    apply_hf_config(cfg, parse(kTinyLlama));
    const json j = hf_config_json(cfg.model, {});
    EXPECT_TRUE(j["rope_scaling"].is_null());
    EXPECT_EQ(j["rope_parameters"], (json{{"rope_type", "default"}, {"rope_theta", 10000.0}}));
    EXPECT_EQ(j["max_position_embeddings"], 2048);  // block_size when not given
    EXPECT_EQ(parse(j).num_key_value_heads, 4);

    config::Config g = load("");
    apply_hf_config(g, parse(kGpt2));
    const json gj = hf_config_json(g.model, export_info("float32", 0, {50256}, {50256}));
    const HfConfig gb = parse(gj);
    EXPECT_EQ(gb.hidden_size, 768);
    EXPECT_EQ(gb.intermediate_size, 3072);
    EXPECT_EQ(gb.max_position_embeddings, 1024);
    EXPECT_EQ(gj["layer_norm_epsilon"].dump(), "1e-05");

    const json gen = hf_generation_config_json(export_info("float32", 0, {1}, {2, 3}));
    EXPECT_EQ(gen, (json{{"_from_model_config", true}, {"bos_token_id", 1}, {"eos_token_id", {2, 3}}}));
}

// ---- init_from resolution ----

TEST(HfResolve, FilesDirectoriesAndTheLlamaRule) {
    const fs::path root = fs::temp_directory_path() / ("hf_resolve_" + std::to_string(::getpid()));
    fs::remove_all(root);
    fs::create_directories(root / "dir");
    write_file_atomic(root / "dir/model.safetensors", "x");
    write_file_atomic(root / "bare.safetensors", "x");

    EXPECT_FALSE(resolve_init_from((root / "bare.safetensors").string(), "llama").config_json);
    const HfSource gpt2_dir = resolve_init_from((root / "dir").string(), "gpt2");
    EXPECT_EQ(gpt2_dir.weights, root / "dir");
    EXPECT_FALSE(gpt2_dir.config_json);
    try {
        resolve_init_from((root / "dir").string(), "llama");
        ADD_FAILURE() << "a llama directory without config.json was accepted";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("has no config.json"), std::string::npos) << e.what();
    }
    EXPECT_THROW(resolve_init_from((root / "nothing").string(), "gpt2"), InputError);
    fs::create_directories(root / "empty");
    EXPECT_THROW(resolve_init_from((root / "empty").string(), "gpt2"), InputError);

    // prepare_init_from: the directory's config.json decides the arch, then the llama rule holds.
    write_file_atomic(root / "dir/config.json", kTinyLlama.dump());
    config::Config cfg = config::load_config_string(
        "data: {source: shards, train_shards: t.bin, val_shards: v.bin}\nmodel: {init_from: " +
            (root / "dir").string() + ", block_size: 64}\n",
        "x.yaml");
    const HfSource s = prepare_init_from(cfg);
    EXPECT_EQ(s.config_json, root / "dir/config.json");
    EXPECT_EQ(cfg.model.arch, "llama");
    EXPECT_EQ(cfg.model.n_layer, 22);
    fs::remove_all(root);
}

}  // namespace
}  // namespace llmt::models
