// The architecture registry (models/arch.h, config/arch_table.h): the config layer's table and the
// models layer's specs name the same families; the schema's model.arch choices come from them; each
// family's config.json is read (both transformers generations), refused where we cannot compute it
// (naming the field) and written back to the same values; the config layer's per-family key checks.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>

#include "config/arch_table.h"
#include "config/config.h"
#include "config/loader.h"
#include "config/schema.h"
#include "core/error.h"
#include "models/arch.h"
#include "models/hf_config.h"
#include "models/language_model.h"
#include "models/registry.h"

namespace llmt::models {
namespace {

using nlohmann::json;

TEST(ArchRegistry, ConfigTableAndSpecsNameTheSameFamilies) {
    const auto& table = config::arch_table();
    const auto& specs = arch_specs();
    ASSERT_EQ(table.size(), specs.size());
    for (std::size_t i = 0; i < specs.size(); ++i) {
        EXPECT_EQ(specs[i]->entry, &table[i]) << table[i].name;
        EXPECT_EQ(&arch_spec(table[i].name), specs[i]);
        const bool lm = table[i].kind == config::ArchKind::kLanguageModel;
        EXPECT_EQ(!specs[i]->model_types.empty(), lm) << table[i].name;  // language models have a config.json
        EXPECT_EQ(static_cast<bool>(specs[i]->write_hf_config), lm) << table[i].name;
        EXPECT_EQ(specs[i]->lora_targets.empty(), !lm) << table[i].name;
        for (const auto& t : specs[i]->model_types) EXPECT_EQ(arch_for_model_type(t), specs[i]) << t;
    }
    EXPECT_EQ(config::find_field("model.arch")->choices, config::arch_names());
    EXPECT_EQ(arch_for_model_type("falcon"), nullptr);
    try {
        (void)arch_spec("falcon");
        FAIL() << "expected InputError";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("model.arch: 'falcon' is not a model this build can train (expected one "
                                             "of gpt2, llama, qwen2, qwen3, mistral, mlp, cnn)"),
                  std::string::npos)
            << e.what();
    }
}

// Every language model is a LanguageModel (decoding, HF names); an image classifier is not, and asking it for
// a decoder is an InputError saying what to use instead.
TEST(ArchRegistry, LanguageModelsDecodeAndClassifiersSayWhatToUse) {
    for (const char* arch : {"gpt2", "llama", "qwen2", "qwen3", "mistral"}) {
        config::Config cfg = config::load_config_string(
            fmt::format("model: {{arch: {}, n_layer: 1, n_head: 2, d_model: 16, vocab_size: 40, block_size: 8}}\n"
                        "data: {{source: shards, train_shards: t.bin, val_shards: v.bin}}\n",
                        arch),
            "x.yaml");
        const auto model = make_model(cfg);
        ASSERT_NE(model->language_model(), nullptr) << arch;
        model->init_random(1);
        EXPECT_EQ(as_language_model(*model).decoder(4)->capacity(), 4) << arch;
    }
    config::Config cfg = config::load_config_string("model: {arch: mlp}\ndata: {source: idx, train_images: a, "
                                                    "train_labels: b, test_images: c, test_labels: d}\n",
                                                    "x.yaml");
    const auto mlp = make_model(cfg);
    EXPECT_EQ(mlp->language_model(), nullptr);
    try {
        (void)as_language_model(*mlp);
        FAIL() << "expected InputError";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("model.arch mlp classifies images and has no text decoder (use llmtrain "
                                             "predict)"),
                  std::string::npos)
            << e.what();
    }
}

// Qwen2.5-0.5B's config.json as transformers 4.40 wrote it.
const json kQwen25_4x = json::parse(R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
  "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 24, "model_type": "qwen2",
  "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.40.1", "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})");

// The same model as transformers 5.x writes it (rope_parameters, dtype, layer_types, no sliding window).
json qwen25_5x() {
    json j = kQwen25_4x;
    j.erase("rope_theta");
    j.erase("torch_dtype");
    j["rope_parameters"] = {{"rope_theta", 1000000.0}, {"rope_type", "default"}};
    j["dtype"] = "bfloat16";
    j["sliding_window"] = nullptr;
    j["layer_types"] = json::array();
    for (int i = 0; i < 24; ++i) j["layer_types"].push_back("full_attention");
    return j;
}

HfConfig parse(const json& j) { return parse_hf_config(j.dump(), "DIR/config.json"); }

json with(json j, const std::string& key, const json& value) {
    j[key] = value;
    return j;
}

TEST(Qwen2Config, BothGenerationsReadTheSameModel) {
    for (const json& j : {kQwen25_4x, qwen25_5x()}) {
        const HfConfig c = parse(j);
        EXPECT_EQ(c.model_type, "qwen2");
        EXPECT_EQ(c.arch, "qwen2");
        EXPECT_EQ(c.hidden_size, 896);
        EXPECT_EQ(c.num_key_value_heads, 2);
        EXPECT_EQ(c.head_dim, 64);
        EXPECT_EQ(c.rope.theta, 1e6);
        EXPECT_EQ(c.rope.scaling.type, "none");
        EXPECT_TRUE(c.tie_word_embeddings);
        EXPECT_EQ(c.norm_eps, 1e-6);
        EXPECT_EQ(c.eos_token_id, (std::vector<int64_t>{151643}));
        EXPECT_EQ(c.dtype, "bfloat16");
    }
}

TEST(Qwen2Config, WhatWeCannotComputeIsRefusedNamingTheField) {
    json sliding = qwen25_5x();
    sliding["layer_types"][23] = "sliding_attention";
    const std::vector<std::pair<json, std::string>> cases = {
        {with(kQwen25_4x, "use_sliding_window", true), "`use_sliding_window`: true is not supported"},
        {sliding, "`layer_types`: \"sliding_attention\" is not supported"},
        {with(kQwen25_4x, "hidden_act", "gelu"), "`hidden_act`: \"gelu\" is not supported"},
        {with(kQwen25_4x, "rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}),
         "`rope_scaling.rope_type`: \"yarn\" is not supported"},
    };
    for (const auto& [j, want] : cases) {
        try {
            (void)parse(j);
            ADD_FAILURE() << "expected FormatError: " << want;
        } catch (const FormatError& e) {
            EXPECT_NE(std::string(e.what()).find("DIR/config.json: " + want), std::string::npos) << e.what();
        }
    }
}

config::Config load(const std::string& yaml) {
    return config::load_config_string("data: {source: shards, train_shards: t.bin, val_shards: v.bin}\n" + yaml,
                                      "x.yaml");
}

TEST(Qwen2Config, TakenIntoAConfigBuildsTheBiasedGraphAndWritesBack) {
    config::Config cfg = load("model:\n  init_from: DIR\n  block_size: 64\n");
    json j = with(kQwen25_4x, "num_hidden_layers", 2);
    j["hidden_size"] = 56;
    j["intermediate_size"] = 64;
    j["vocab_size"] = 300;
    apply_hf_config(cfg, parse(j));
    EXPECT_EQ(cfg.model.arch, "qwen2");
    EXPECT_EQ(cfg.model.rope.theta, 1e6f);
    EXPECT_EQ(cfg.model.n_kv_head, 2);
    const auto model = make_model(cfg);
    EXPECT_EQ(model->arch(), "qwen2");
    int biases = 0;
    for (const auto& s : model->param_specs())
        for (const auto& part : s.hf) biases += part.name.find("_proj.bias") != std::string::npos;
    EXPECT_EQ(biases, 2 * 3);  // q, k and v per layer
    // 2 layers of (q|k|v 56x(56+2x8) + biases, o 56x56, gate|up|down 3x56x64, 2 norms) + embedding + norm.
    const int64_t layer = 56 * 72 + 72 + 56 * 56 + 3 * 56 * 64 + 2 * 56;
    EXPECT_EQ(model->num_parameters(), 2 * layer + 300 * 56 + 56);

    // Written back: transformers' Qwen2 fields, and read again to the same model keys.
    HfExportInfo info;
    info.max_position_embeddings = 32768;
    const json out = hf_config_json(cfg.model, info);
    EXPECT_EQ(out["architectures"], json::array({"Qwen2ForCausalLM"}));
    EXPECT_EQ(out["model_type"], "qwen2");
    EXPECT_EQ(out["use_sliding_window"], false);
    EXPECT_EQ(out["rope_parameters"]["rope_theta"], 1e6);
    config::Config again = load("model:\n  init_from: DIR\n  block_size: 64\n");
    apply_hf_config(again, parse_hf_config(out.dump(), "OUT/config.json"));
    EXPECT_EQ(again.resolved["model"], cfg.resolved["model"]);
}

// Qwen3-0.6B's config.json (transformers 4.51): head_dim 128 with hidden_size / heads = 64.
const json kQwen3_06b = json::parse(R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024, "initializer_range": 0.02,
  "intermediate_size": 3072, "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
  "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": true, "use_sliding_window": false,
  "vocab_size": 151936})");

TEST(Qwen3Config, HeadDimIsItsOwnAndTheNormsAreHfTensors) {
    EXPECT_EQ(parse(kQwen3_06b).head_dim, 128);
    json no_hd = kQwen3_06b;
    no_hd.erase("head_dim");
    EXPECT_EQ(parse(no_hd).head_dim, 128);  // Qwen3Config's default, not 1024 / 16
    EXPECT_THROW((void)parse(with(kQwen3_06b, "attention_bias", true)), FormatError);
    EXPECT_THROW((void)parse(with(kQwen3_06b, "use_sliding_window", true)), FormatError);

    config::Config cfg = load("model:\n  init_from: DIR\n  block_size: 64\n");
    json small = kQwen3_06b;
    small["num_hidden_layers"] = 1;
    small["hidden_size"] = 32;
    small["intermediate_size"] = 48;
    small["num_attention_heads"] = 4;
    small["num_key_value_heads"] = 2;
    small["head_dim"] = 16;
    small["vocab_size"] = 100;
    apply_hf_config(cfg, parse(small));
    EXPECT_EQ(cfg.model.arch, "qwen3");
    EXPECT_EQ(cfg.model.head_dim, 16);
    const auto model = make_model(cfg);
    std::vector<std::string> names;
    for (const auto& spec : model->param_specs()) names.push_back(spec.name);
    for (const char* n : {"model.layers.0.self_attn.q_norm.weight", "model.layers.0.self_attn.k_norm.weight"})
        EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
    // q|k|v 32 -> (4 + 2 x 2) x 16, o 64 -> 32, 2 head norms of 16, MLP 3 x 32 x 48, 2 norms; tied embedding, norm.
    EXPECT_EQ(model->num_parameters(), 32 * 128 + 64 * 32 + 2 * 16 + 3 * 32 * 48 + 2 * 32 + 100 * 32 + 32);
    const json out = hf_config_json(cfg.model, HfExportInfo{});
    EXPECT_EQ(out["architectures"], json::array({"Qwen3ForCausalLM"}));
    EXPECT_EQ(out["head_dim"], 16);
    config::Config again = load("model:\n  init_from: DIR\n  block_size: 64\n");
    apply_hf_config(again, parse_hf_config(out.dump(), "OUT/config.json"));
    EXPECT_EQ(again.resolved["model"], cfg.resolved["model"]);
}

// Mistral-7B-v0.1's config.json (transformers 4.34), and the same with v0.2's null window in 5.x spelling.
const json kMistral_4x = json::parse(R"({
  "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
  "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 32768,
  "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": false,
  "torch_dtype": "bfloat16", "transformers_version": "4.34.0.dev0", "use_cache": true, "vocab_size": 32000})");

TEST(MistralConfig, TheWindowIsANumberOrNull) {
    const HfConfig a = parse(kMistral_4x);
    EXPECT_EQ(a.arch, "mistral");
    EXPECT_EQ(a.head_dim, 128);
    ASSERT_EQ(a.family_values.back().first, "model.sliding_window");
    EXPECT_EQ(a.family_values.back().second, 4096);
    json v2 = kMistral_4x;
    v2["sliding_window"] = nullptr;
    v2["head_dim"] = 160;  // may differ from hidden_size / heads (Mistral-Nemo: 128, with 5120 / 32 = 160)
    v2.erase("rope_theta");
    v2["rope_parameters"] = {{"rope_theta", 1000000.0}, {"rope_type", "default"}};
    const HfConfig b = parse(v2);
    EXPECT_EQ(b.family_values.back().second, 0);
    EXPECT_EQ(b.head_dim, 160);
    EXPECT_EQ(b.rope.theta, 1e6);
    // Per-layer patterns we do not compute are refused naming the field.
    json mixed = kMistral_4x;
    mixed["layer_types"] = {"sliding_attention", "full_attention"};
    EXPECT_THROW((void)parse(mixed), FormatError);
    try {
        (void)parse(with(kMistral_4x, "attention_bias", true));
        FAIL();
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("`attention_bias`: true is not supported"), std::string::npos)
            << e.what();
    }
    // Taken into a config, written back: the window survives both ways.
    config::Config cfg = load("model:\n  init_from: DIR\n  block_size: 64\n");
    json small = kMistral_4x;
    small["num_hidden_layers"] = 1;
    small["hidden_size"] = 64;
    small["intermediate_size"] = 96;
    small["num_attention_heads"] = 4;
    small["num_key_value_heads"] = 2;
    small["vocab_size"] = 100;
    small["sliding_window"] = 8;
    apply_hf_config(cfg, parse(small));
    EXPECT_EQ(cfg.model.arch, "mistral");
    EXPECT_EQ(cfg.model.mistral.sliding_window, 8);
    EXPECT_NE(make_model(cfg)->summary().find("sliding window 8"), std::string::npos);
    const json out = hf_config_json(cfg.model, HfExportInfo{});
    EXPECT_EQ(out["architectures"], json::array({"MistralForCausalLM"}));
    EXPECT_EQ(out["sliding_window"], 8);
    config::Config again = load("model:\n  init_from: DIR\n  block_size: 64\n");
    apply_hf_config(again, parse_hf_config(out.dump(), "OUT/config.json"));
    EXPECT_EQ(again.resolved["model"], cfg.resolved["model"]);
}

TEST(ArchTable, KeysOfAnotherFamilyAndChatFollowTheTable) {
    // Only mistral reads model.sliding_window.
    EXPECT_NO_THROW(load("model: {arch: mistral, sliding_window: 4096}\n"));
    try {
        (void)load("model: {arch: llama, sliding_window: 4096}\n");
        FAIL() << "expected a config error";
    } catch (const config::ConfigValidationError& e) {
        EXPECT_NE(std::string(e.what()).find("is read only with model.arch mistral, and model.arch is llama"),
                  std::string::npos)
            << e.what();
    }
    // qwen2 reads RoPE keys, gpt2 does not (the message lists who does).
    EXPECT_NO_THROW(load("model: {arch: qwen2, rope_theta: 1000000, n_kv_head: 4}\n"));
    try {
        (void)load("model: {arch: gpt2, rope_theta: 1000000}\n");
        FAIL() << "expected a config error";
    } catch (const config::ConfigValidationError& e) {
        EXPECT_NE(std::string(e.what()).find(
                      "is read only with model.arch llama, qwen2, qwen3 or mistral, and model.arch is gpt2"),
                  std::string::npos)
            << e.what();
    }
    // Chat rows restart positions: any family with rotary positions takes them.
    EXPECT_NO_THROW((void)config::load_config_string(
        "model: {arch: qwen2}\ndata: {source: chat, paths: [a.jsonl], tokenizer: /m}\n", "c.yaml"));
    EXPECT_TRUE(config::has_rotary_positions("qwen2"));
    EXPECT_FALSE(config::has_rotary_positions("gpt2"));
    EXPECT_TRUE(config::is_classifier_arch("cnn"));
    EXPECT_FALSE(config::is_classifier_arch("qwen2"));
    for (const char* gated : {"llama", "qwen2", "qwen3", "mistral"})
        EXPECT_TRUE(config::has_gated_mlp(gated)) << gated;
    EXPECT_FALSE(config::has_gated_mlp("gpt2"));
    EXPECT_FALSE(config::has_gated_mlp("mlp"));
}

// Outside src/models/ (and the config layer's family table) no code compares a model.arch value with a
// family's name: what a layer needs of a family is a fact of the table (config/arch_table.h) or the registry.
TEST(ArchRegistry, NoArchitectureNameIsComparedOutsideTheRegistry) {
    namespace fs = std::filesystem;
    const fs::path src = fs::path(LLMT_SOURCE_DIR) / "src";
    std::string names;
    for (const std::string& n : config::arch_names()) names += (names.empty() ? "" : "|") + n;
    const std::regex compare("(arch|model_type)[A-Za-z_.()\\]\"]*\\s*[!=]=\\s*\"(" + names + ")\"");
    int files = 0;
    for (const auto& e : fs::recursive_directory_iterator(src)) {
        const std::string rel = fs::relative(e.path(), src).string();
        if (!e.is_regular_file() || rel.rfind("models/", 0) == 0 || rel.rfind("config/arch_table", 0) == 0) continue;
        const std::string ext = e.path().extension().string();
        if (ext != ".cpp" && ext != ".h") continue;
        ++files;
        std::ifstream in(e.path());
        std::string line;
        for (int n = 1; std::getline(in, line); ++n)
            EXPECT_FALSE(std::regex_search(line, compare)) << rel << ":" << n << ": " << line;
    }
    EXPECT_GT(files, 100) << "the scan found few sources: is LLMT_SOURCE_DIR the checkout?";
}

}  // namespace
}  // namespace llmt::models
