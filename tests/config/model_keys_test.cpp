// The LLaMA model keys: model.arch llama, head_dim, rope_theta and the model.rope_scaling group
// (the first keys nested below a section: YAML, --set, print-config and messages), the per-architecture
// refusals, and Config::written, the record of which keys the user wrote.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>

#include "config/arch_table.h"
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
    const Config c = load(
        "  arch: llama\n  n_head: 32\n  n_kv_head: 8\n  d_model: 2048\n  rope_theta: 500000\n"
        "  rope_scaling:\n    type: llama3\n    factor: 32\n    original_max_position_embeddings: 8192\n");
    EXPECT_EQ(c.model.arch, "llama");
    EXPECT_EQ(c.model.head_dim, 64);  // derived: d_model / n_head
    EXPECT_EQ(c.model.rope.theta, 500000.f);
    EXPECT_EQ(c.model.rope.scaling.type, "llama3");
    EXPECT_EQ(c.model.rope.scaling.factor, 32.0);
    EXPECT_EQ(c.model.rope.scaling.low_freq_factor, 1.0);  // defaults: Llama 3.1's values
    EXPECT_EQ(c.model.rope.scaling.high_freq_factor, 4.0);
    EXPECT_EQ(c.model.rope.scaling.original_max_position_embeddings, 8192);
    EXPECT_EQ(c.resolved["model"]["rope_scaling"]["factor"], 32.0);
    EXPECT_EQ(c.written.at("model.rope_scaling.factor"), "m.yaml:10:5");

    const Config f = load("  arch: llama\n  rope_scaling: {type: llama3, factor: 8}\n");
    EXPECT_EQ(f.model.rope.scaling.factor, 8.0);
    EXPECT_EQ(load("  arch: llama\n  rope_scaling:\n").model.rope.scaling.type, "none");  // an empty group
}

TEST(ModelKeys, SetReachesNestedKeys) {
    const Config c = load("  arch: llama\n", {"model.rope_scaling.type=llama3", "model.rope_scaling.factor=16"});
    EXPECT_EQ(c.model.rope.scaling.type, "llama3");
    EXPECT_EQ(c.model.rope.scaling.factor, 16.0);
    EXPECT_EQ(c.written.at("model.rope_scaling.factor"), "--set model.rope_scaling.factor=16");
    // Over a group written in the file.
    const Config d =
        load("  arch: llama\n  rope_scaling: {type: llama3, factor: 8}\n", {"model.rope_scaling.factor=16"});
    EXPECT_EQ(d.model.rope.scaling.factor, 16.0);
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
    EXPECT_NE(
        is[0].message.find("is read only with model.arch llama, qwen2, qwen3 or mistral, and model.arch is gpt2"),
        std::string::npos);
    EXPECT_EQ(is[1].key, "model.rope_scaling.type");
    EXPECT_EQ(is[2].key, "model.n_kv_head");
    EXPECT_NE(is[2].message.find("gpt2 uses full multi-head attention"), std::string::npos);
    EXPECT_EQ(is[3].key, "model.head_dim");
    EXPECT_NE(is[3].message.find("must be model.d_model / model.n_head (64)"), std::string::npos) << is[3].message;
    // The default value written out is not "unread".
    EXPECT_NO_THROW(load("  rope_theta: 10000\n  head_dim: 64\n"));
}

// The flat keys land in their family's section of ModelConfig (config/typed.cpp), and the resolved config keeps
// them flat.
TEST(ModelKeys, SectionsAreFilledFromTheFlatKeys) {
    const Config m = load("  arch: mistral\n  sliding_window: 16\n  rope_theta: 1000000\n");
    EXPECT_EQ(m.model.mistral.sliding_window, 16);
    EXPECT_EQ(m.model.rope.theta, 1e6f);
    EXPECT_EQ(m.resolved["model"]["sliding_window"], 16);
    EXPECT_EQ(m.resolved["model"]["rope_theta"], 1e6);
    const Config c = load_config_string("model: {arch: cnn, image_size: 32, in_channels: 3, num_classes: 5, "
                                        "conv_channels: [8, 16], hidden_sizes: [64, 32]}\n",
                                        "c.yaml", {}, ConfigUse::kModelOnly);
    const ModelConfig::Classifier& k = c.model.classifier;
    EXPECT_EQ(k.image_size, 32);
    EXPECT_EQ(k.in_channels, 3);
    EXPECT_EQ(k.num_classes, 5);
    EXPECT_EQ(k.conv_channels, (std::vector<int>{8, 16}));
    EXPECT_EQ(k.hidden_sizes, (std::vector<int>{64, 32}));
    EXPECT_EQ(c.resolved["model"]["image_size"], 32);
    // A family that does not read a section holds its defaults.
    EXPECT_EQ(c.model.mistral.sliding_window, 0);
    EXPECT_EQ(c.model.rope.scaling.type, "none");
    EXPECT_EQ(m.model.classifier.image_size, 28);
}

// A checkpoint's resolved config (its state.json "config", what resume compares and what a config is rebuilt
// from) written by `llmtrain train` built from commit 0912332, whose ModelConfig was one flat struct, for
// fixtures/mistral_resolved.yaml (Mistral with a window, RoPE base 1e6 and llama3 scaling): the same YAML
// resolves to the same JSON today, and the JSON loads into the sections.
TEST(ModelKeys, ResolvedConfigOfAnEarlierCheckpointIsUnchanged) {
    const std::string dir = LLMT_SOURCE_DIR "/tests/config/fixtures/";
    auto text_of = [](const std::string& path) {
        std::ifstream in(path);
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    const nlohmann::json saved = nlohmann::json::parse(text_of(dir + "mistral_resolved.json"));
    const Config now = load_config_string(text_of(dir + "mistral_resolved.yaml"), "mistral_resolved.yaml",
                                          {"output.run_id=straight"});
    EXPECT_EQ(nlohmann::json::parse(now.resolved.dump()), saved);
    const Config again = load_config_string(saved.dump(), "state.json");
    EXPECT_EQ(again.model.mistral.sliding_window, 8);
    EXPECT_EQ(again.model.rope.theta, 1e6f);
    EXPECT_EQ(again.model.rope.scaling.type, "llama3");
    EXPECT_EQ(again.model.rope.scaling.factor, 16.0);
    EXPECT_EQ(again.model.rope.scaling.original_max_position_embeddings, 16);
}

// Every key of a family's config section (ModelConfig::rope, ::mistral, ::classifier), set to another
// value than its default under every family: accepted where the family reads it, and otherwise refused
// naming the key and model.arch, never accepted and ignored. The readers are written out here, not taken
// from config/arch_table.cpp, so a row that loses a key fails.
TEST(ModelKeys, SectionKeysAreRefusedUnderFamiliesThatDoNotReadThem) {
    const std::vector<std::string> rope = {"llama", "qwen2", "qwen3", "mistral"}, image = {"mlp", "cnn"};
    struct Probe {
        std::string key;
        std::vector<std::string> sets;  // the key's value, and what it needs where it is read
        std::vector<std::string> readers;
    };
    const std::vector<Probe> probes = {
        {"model.rope_theta", {"model.rope_theta=500000"}, rope},
        {"model.rope_scaling.type", {"model.rope_scaling.type=llama3"}, rope},
        {"model.rope_scaling.factor", {"model.rope_scaling.type=llama3", "model.rope_scaling.factor=16"}, rope},
        {"model.rope_scaling.low_freq_factor",
         {"model.rope_scaling.type=llama3", "model.rope_scaling.low_freq_factor=2"}, rope},
        {"model.rope_scaling.high_freq_factor",
         {"model.rope_scaling.type=llama3", "model.rope_scaling.high_freq_factor=8"}, rope},
        {"model.rope_scaling.original_max_position_embeddings",
         {"model.rope_scaling.type=llama3", "model.rope_scaling.original_max_position_embeddings=4096"}, rope},
        {"model.sliding_window", {"model.sliding_window=4"}, {"mistral"}},
        {"model.image_size", {"model.image_size=32"}, image},
        {"model.in_channels", {"model.in_channels=3"}, image},
        {"model.num_classes", {"model.num_classes=5"}, image},
        {"model.hidden_sizes", {"model.hidden_sizes=[8]"}, image},
        {"model.conv_channels", {"model.conv_channels=[8]"}, {"cnn"}},
    };
    for (const std::string& arch : arch_names()) {
        for (const Probe& p : probes) {
            std::vector<std::string> sets = p.sets;
            sets.push_back("model.arch=" + arch);
            const bool reads = std::find(p.readers.begin(), p.readers.end(), arch) != p.readers.end();
            const ConfigIssue* refusal = nullptr;
            const auto is = issues_of("", sets);
            for (const ConfigIssue& i : is)
                if (i.key == p.key) refusal = &i;
            if (reads) {
                EXPECT_EQ(refusal, nullptr) << arch << " reads " << p.key << ":\n" << joined(is);
                continue;
            }
            ASSERT_NE(refusal, nullptr) << arch << " does not read " << p.key << ", which was accepted:\n"
                                        << joined(is);
            EXPECT_NE(refusal->message.find("and model.arch is " + arch), std::string::npos)
                << p.key << " under " << arch << ": " << refusal->message;
            EXPECT_EQ(refusal->where, "--set " + p.sets.back()) << refusal->message;
        }
    }
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
