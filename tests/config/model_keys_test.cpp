// The LLaMA model keys: model.arch llama, head_dim, rope_theta and the model.rope_scaling group
// (the first keys nested below a section: YAML, --set, print-config and messages), the per-architecture
// refusals, and Config::written, the record of which keys the user wrote.
#include <gtest/gtest.h>

#include "config/emit.h"
#include "config/loader.h"
#include "config/schema.h"

namespace llmt::config {
namespace {

const std::string kData = "data: {source: shards, train_shards: t.bin, val_shards: v.bin}\n";

Config load(const std::string& model, const std::vector<std::string>& sets = {}) {
    return load_config_string(kData + "model:\n" + model, "m.yaml", sets);
}

std::vector<ConfigIssue> issues_of(const std::string& model, const std::vector<std::string>& sets = {}) {
    try {
        load(model, sets);
    } catch (const ConfigValidationError& e) {
        return e.issues();
    }
    return {};
}

std::string joined(const std::vector<ConfigIssue>& is) {
    std::string s;
    for (const auto& i : is) s += i.where + ": `" + i.key + "`: " + i.message + "\n";
    return s;
}

TEST(ModelKeys, LlamaWithRopeScalingAsABlockOrFlowMapping) {
    const Config c = load("  arch: llama\n  n_head: 32\n  n_kv_head: 8\n  d_model: 2048\n  rope_theta: 500000\n"
                          "  rope_scaling:\n    type: llama3\n    factor: 32\n    original_max_position_embeddings: 8192\n");
    EXPECT_EQ(c.model.arch, "llama");
    EXPECT_EQ(c.model.head_dim, 64);  // derived: d_model / n_head
    EXPECT_EQ(c.model.rope_theta, 500000.f);
    EXPECT_EQ(c.model.rope_scaling.type, "llama3");
    EXPECT_EQ(c.model.rope_scaling.factor, 32.0);
    EXPECT_EQ(c.model.rope_scaling.low_freq_factor, 1.0);  // defaults: Llama 3.1's values
    EXPECT_EQ(c.model.rope_scaling.high_freq_factor, 4.0);
    EXPECT_EQ(c.model.rope_scaling.original_max_position_embeddings, 8192);
    EXPECT_EQ(c.resolved["model"]["rope_scaling"]["factor"], 32.0);
    EXPECT_EQ(c.written.at("model.rope_scaling.factor"), "m.yaml:10:5");

    const Config f = load("  arch: llama\n  rope_scaling: {type: llama3, factor: 8}\n");
    EXPECT_EQ(f.model.rope_scaling.factor, 8.0);
    EXPECT_EQ(load("  arch: llama\n  rope_scaling:\n").model.rope_scaling.type, "none");  // an empty group
}

TEST(ModelKeys, SetReachesNestedKeys) {
    const Config c = load("  arch: llama\n", {"model.rope_scaling.type=llama3", "model.rope_scaling.factor=16"});
    EXPECT_EQ(c.model.rope_scaling.type, "llama3");
    EXPECT_EQ(c.model.rope_scaling.factor, 16.0);
    EXPECT_EQ(c.written.at("model.rope_scaling.factor"), "--set model.rope_scaling.factor=16");
    // Over a group written in the file.
    const Config d = load("  arch: llama\n  rope_scaling: {type: llama3, factor: 8}\n", {"model.rope_scaling.factor=16"});
    EXPECT_EQ(d.model.rope_scaling.factor, 16.0);
}

TEST(ModelKeys, UnknownAndMistypedNestedKeys) {
    auto is = issues_of("  arch: llama\n  rope_scaling: {type: llama3, fctor: 8}\n");
    ASSERT_EQ(is.size(), 1u) << joined(is);
    EXPECT_EQ(is[0].key, "model.rope_scaling.fctor");
    EXPECT_NE(is[0].message.find("did you mean `model.rope_scaling.factor`?"), std::string::npos) << is[0].message;

    is = issues_of("  arch: llama\n  rope_scaling: llama3\n");
    ASSERT_EQ(is.size(), 1u) << joined(is);
    EXPECT_EQ(is[0].key, "model.rope_scaling");
    EXPECT_NE(is[0].message.find("expected a mapping of keys"), std::string::npos);

    is = issues_of("  arch: llama\n  rope_scaling: {type: yarn}\n");
    ASSERT_EQ(is.size(), 1u) << joined(is);
    EXPECT_NE(is[0].message.find("expected one of none, llama3"), std::string::npos) << is[0].message;

    is = issues_of("  arch: llama\n", {"model.rope_scaling.nope=1"});
    ASSERT_EQ(is.size(), 1u) << joined(is);
    EXPECT_EQ(is[0].key, "model.rope_scaling.nope");
    is = issues_of("  arch: llama\n", {"model.rope_scaling.fctor=1"});
    ASSERT_EQ(is.size(), 1u) << joined(is);
    EXPECT_NE(is[0].message.find("did you mean `model.rope_scaling.factor`?"), std::string::npos) << is[0].message;
}

TEST(ModelKeys, Gpt2RefusesWhatItDoesNotRead) {
    auto is = issues_of("  rope_theta: 500000\n  rope_scaling: {type: llama3}\n  n_kv_head: 4\n  head_dim: 32\n");
    ASSERT_EQ(is.size(), 4u) << joined(is);
    EXPECT_EQ(is[0].key, "model.rope_theta");
    EXPECT_EQ(is[0].where, "m.yaml:3:3");
    EXPECT_NE(is[0].message.find("is read only with model.arch llama, qwen2, qwen3 or mistral, and model.arch is gpt2"), std::string::npos);
    EXPECT_EQ(is[1].key, "model.rope_scaling.type");
    EXPECT_EQ(is[2].key, "model.n_kv_head");
    EXPECT_NE(is[2].message.find("gpt2 uses full multi-head attention"), std::string::npos);
    EXPECT_EQ(is[3].key, "model.head_dim");
    EXPECT_NE(is[3].message.find("must be model.d_model / model.n_head (64)"), std::string::npos) << is[3].message;
    // The default value written out is not "unread".
    EXPECT_NO_THROW(load("  rope_theta: 10000\n  head_dim: 64\n"));
}

TEST(ModelKeys, LlamaShapeChecks) {
    // Grouped-query attention: n_head a multiple of n_kv_head.
    auto is = issues_of("  arch: llama\n  n_head: 12\n  n_kv_head: 5\n");
    ASSERT_EQ(is.size(), 1u) << joined(is);
    EXPECT_EQ(is[0].key, "model.n_kv_head");
    EXPECT_NE(is[0].message.find("model.n_head (12) must be a multiple of model.n_kv_head (5)"), std::string::npos);
    // head_dim may differ from d_model / n_head for llama (as HF's head_dim), but RoPE needs it even.
    EXPECT_EQ(load("  arch: llama\n  head_dim: 128\n").model.head_dim, 128);
    is = issues_of("  arch: llama\n  head_dim: 33\n");
    ASSERT_EQ(is.size(), 1u) << joined(is);
    EXPECT_EQ(is[0].key, "model.head_dim");
}

TEST(ModelKeys, Llama3FieldsOnlyWithLlama3) {
    auto is = issues_of("  arch: llama\n  rope_scaling: {factor: 32, low_freq_factor: 2}\n");
    ASSERT_EQ(is.size(), 2u) << joined(is);
    EXPECT_EQ(is[0].key, "model.rope_scaling.factor");
    EXPECT_NE(is[0].message.find("is read only with model.rope_scaling.type llama3, and the type is none"),
              std::string::npos);
    EXPECT_EQ(is[1].key, "model.rope_scaling.low_freq_factor");
    // The llama3 ramp divides by high - low.
    is = issues_of("  arch: llama\n  rope_scaling: {type: llama3, low_freq_factor: 4, high_freq_factor: 4}\n");
    ASSERT_EQ(is.size(), 1u) << joined(is);
    EXPECT_EQ(is[0].key, "model.rope_scaling.high_freq_factor");
    is = issues_of("  arch: llama\n  rope_scaling: {type: llama3, factor: 0.5}\n");
    ASSERT_EQ(is.size(), 1u) << joined(is);
    EXPECT_EQ(is[0].key, "model.rope_scaling.factor");
}

TEST(ModelKeys, WrittenRecordsWhatTheUserWrote) {
    const Config c = load("  n_layer: 4\n  n_kv_head: null\n", {"model.d_model=192"});
    EXPECT_EQ(c.written.at("model.n_layer"), "m.yaml:3:3");
    EXPECT_EQ(c.written.at("model.d_model"), "--set model.d_model=192");
    EXPECT_TRUE(c.wrote("data.train_shards"));
    EXPECT_FALSE(c.wrote("model.n_kv_head"));  // null asks for the derived value
    EXPECT_FALSE(c.wrote("model.n_head"));     // a default
    EXPECT_FALSE(c.wrote("model.head_dim"));   // derived
}

TEST(ModelKeys, PrintConfigNestsTheGroupAndReadsBack) {
    const Config c = load("  arch: llama\n  rope_scaling: {type: llama3, factor: 32}\n");
    for (bool comments : {false, true}) {
        const std::string y = to_yaml(c.resolved, comments);
        EXPECT_NE(y.find("  rope_scaling:\n    type: llama3"), std::string::npos) << y;
        const Config again = load_config_string(y, "again.yaml");
        EXPECT_EQ(again.resolved, c.resolved) << y;
    }
    EXPECT_NE(to_yaml(c.resolved, true).find("    factor: 32.0"), std::string::npos);
}

// What a server or launcher hands to the process that runs the job: the written keys only, so that
// process still tells them from defaults.
TEST(ModelKeys, WrittenYamlKeepsTheDistinction) {
    const Config c = load("  arch: llama\n  rope_scaling: {factor: 32, type: llama3}\n", {"model.n_layer=4"});
    const std::string y = to_yaml_written(c);
    EXPECT_EQ(y.find("n_head"), std::string::npos) << y;  // a default: not written
    const Config again = load_config_string(y, "again.yaml");
    EXPECT_EQ(again.resolved, c.resolved) << y;
    std::vector<std::string> keys, keys_again;
    for (const auto& [k, w] : c.written) keys.push_back(k);
    for (const auto& [k, w] : again.written) keys_again.push_back(k);
    EXPECT_EQ(keys_again, keys) << y;
}

}  // namespace
}  // namespace llmt::config
