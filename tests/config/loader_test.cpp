// Strict config loading: every bad input is refused with its key path and location, all at once.
#include "config/loader.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "config/emit.h"
#include "config/schema.h"

namespace llmt::config {
namespace {

const std::string kMinimal = R"(schema_version: 1
model:
  n_layer: 2
  n_head: 4
  d_model: 64
  block_size: 32
data:
  train_shards: data/train_*.bin
  val_shards: data/val_*.bin
)";

// Loads and returns the issues (fails the test if it loads).
std::vector<ConfigIssue> issues_of(const std::string& yaml, const std::vector<std::string>& sets = {}) {
    try {
        load_config_string(yaml, "t.yaml", sets);
    } catch (const ConfigValidationError& e) {
        EXPECT_FALSE(e.issues().empty());
        return e.issues();
    }
    ADD_FAILURE() << "config loaded but should have been refused:\n" << yaml;
    return {};
}

using Sets = std::vector<std::string>;

std::string joined(const std::vector<ConfigIssue>& issues) {
    std::string s;
    for (const auto& i : issues) s += i.where + " | " + i.key + " | " + i.message + "\n";
    return s;
}

TEST(ConfigLoader, PresetsValidate) {
    for (const auto& e : std::filesystem::directory_iterator(std::string(LLMT_SOURCE_DIR) + "/configs/presets")) {
        SCOPED_TRACE(e.path());
        EXPECT_NO_THROW(load_config_file(e.path()));
    }
}

TEST(ConfigLoader, DerivedDefaults) {
    Config c = load_config_string(kMinimal, "t.yaml");
    EXPECT_EQ(c.model.n_kv_head, 4);
    EXPECT_EQ(c.model.d_ff, 256);
    EXPECT_EQ(c.model.padded_vocab_size(), 50304);  // 50257 rounded up to a multiple of 128
    EXPECT_EQ(c.resolved["model"]["d_ff"], 256);
    EXPECT_DOUBLE_EQ(c.trainer.betas[1], 0.95);
}

TEST(ConfigLoader, EveryDefaultIsMaterialized) {
    Config c = load_config_string(kMinimal, "t.yaml");
    for (const auto& f : schema_fields()) {
        const auto* v = resolved_value(c.resolved, f.path);
        EXPECT_TRUE(v && !v->is_null()) << f.path;
    }
}

TEST(ConfigLoader, UnknownKeySuggestsNearest) {
    auto is = issues_of(kMinimal + "trainer:\n  lr_warmup: 10\n");
    ASSERT_EQ(is.size(), 1u) << joined(is);
    EXPECT_EQ(is[0].key, "trainer.lr_warmup");
    EXPECT_EQ(is[0].where, "t.yaml:11:3");
    EXPECT_NE(is[0].message.find("did you mean `trainer.warmup_steps`?"), std::string::npos) << is[0].message;

    is = issues_of(kMinimal + "trainer:\n  max_step: 10\n");
    EXPECT_NE(is[0].message.find("`trainer.max_steps`"), std::string::npos) << is[0].message;

    is = issues_of(kMinimal + "trainr:\n  lr: 0.1\n");
    EXPECT_EQ(is[0].key, "trainr");
    EXPECT_NE(is[0].message.find("`trainer`"), std::string::npos) << is[0].message;
}

TEST(ConfigLoader, WrongTypeNamesPathLocationExpectedAndFound) {
    auto is = issues_of(kMinimal + "trainer:\n  lr: fast\n");
    ASSERT_EQ(is.size(), 1u);
    EXPECT_EQ(is[0].key, "trainer.lr");
    EXPECT_EQ(is[0].where, "t.yaml:11:3");
    EXPECT_NE(is[0].message.find("expected a number > 0"), std::string::npos);
    EXPECT_NE(is[0].message.find("found `fast`"), std::string::npos);
}

TEST(ConfigLoader, QuotedNumberIsNotANumber) {
    auto is = issues_of(kMinimal + "trainer:\n  max_steps: \"100\"\n");
    EXPECT_NE(is[0].message.find("quoted string"), std::string::npos);
}

TEST(ConfigLoader, AllErrorsReportedTogetherInFileOrder) {
    auto is = issues_of(kMinimal +
                        "trainer:\n  lr: -1\n  bogus: 1\n  betas: [0.9]\n  schedule: cosin\nrun:\n  device: gpu\n"
                        "  deterministic: yes\n");
    ASSERT_EQ(is.size(), 6u) << joined(is);
    EXPECT_EQ(is[0].key, "trainer.lr");
    EXPECT_EQ(is[1].key, "trainer.bogus");
    EXPECT_EQ(is[2].key, "trainer.betas");
    EXPECT_EQ(is[3].key, "trainer.schedule");
    EXPECT_NE(is[3].message.find("did you mean `cosine`"), std::string::npos);
    EXPECT_EQ(is[4].key, "run.device");
    EXPECT_EQ(is[5].key, "run.deterministic");
    EXPECT_NE(is[5].message.find("true/false"), std::string::npos);
}

TEST(ConfigLoader, RangesAndIntegers) {
    EXPECT_EQ(issues_of(kMinimal + "trainer:\n  max_steps: 0\n")[0].key, "trainer.max_steps");
    EXPECT_EQ(issues_of(kMinimal + "trainer:\n  max_steps: 2.5\n")[0].key, "trainer.max_steps");
    EXPECT_EQ(issues_of(kMinimal + "lora:\n  dropout: 1.5\n")[0].key, "lora.dropout");
    EXPECT_EQ(issues_of(kMinimal + "dist:\n  zero_stage: 2\n")[0].key, "dist.zero_stage");
    EXPECT_EQ(issues_of(kMinimal + "trainer:\n  lr: .nan\n")[0].key, "trainer.lr");
    EXPECT_EQ(issues_of("schema_version: 2\n" + kMinimal.substr(kMinimal.find('\n') + 1))[0].key, "schema_version");
    // Integral floats are accepted for integers (1e4 steps is a common way to write it).
    Config c = load_config_string(kMinimal + "trainer:\n  max_steps: 1e4\n  warmup_steps: 10\n", "t.yaml");
    EXPECT_EQ(c.trainer.max_steps, 10000);
}

TEST(ConfigLoader, CrossFieldChecks) {
    // Duplicate sections are refused, so each case is a whole config on this base.
    std::string base = R"(data:
  train_shards: a
  val_shards: b
)";
    auto one = [&](const std::string& body) {
        try {
            load_config_string(base + body, "t.yaml");
        } catch (const ConfigValidationError& e) {
            return e.issues().at(0).key + ": " + e.issues().at(0).message;
        }
        return std::string("loaded");
    };
    EXPECT_EQ(one("model:\n  d_model: 100\n  n_head: 3\n").rfind("model.d_model: must be divisible", 0), 0u);
    EXPECT_EQ(one("trainer:\n  warmup_steps: 20\n  max_steps: 10\n"), "loaded");  // shortened, with a warning
    EXPECT_EQ(one("trainer:\n  lr: 1e-4\n  min_lr: 1e-3\n").rfind("trainer.min_lr", 0), 0u);
    EXPECT_EQ(one("dist:\n  backend: nccl\nrun:\n  device: cpu\n").rfind("dist.backend", 0), 0u);
    EXPECT_EQ(one("model:\n  n_head: 4\n  n_kv_head: 3\n  d_model: 64\n").rfind("model.n_kv_head", 0), 0u);
    EXPECT_EQ(one("run:\n  name: ../etc\n").rfind("run.name", 0), 0u);
    EXPECT_EQ(one("output:\n  run_id: a/b\n").rfind("output.run_id", 0), 0u);
    // Evaluation off: no validation shards needed. 0 means off for eval/save cadence.
    EXPECT_EQ(one("trainer:\n  eval_every_steps: 0\n  save_every_steps: 0\n").substr(0, 6), "loaded");
}

// Values this version would accept but not act on (docs/config.md) are refused, each naming its key,
// together with every other problem of the file.
TEST(ConfigLoader, ValuesThisVersionCannotActOnAreRefusedTogether) {
    auto is = issues_of(kMinimal +
                        "run:\n  device: cuda\n  deterministic: true\n"
                        "lora:\n  alpha: 8\n  target_modules: [c_proj]\n"
                        "tracking:\n  mlflow_dir: ml\n  mlflow: {uri: \"s3://b/m\"}\n"
                        "trainer:\n  lr: -1\n",
                        {"data.cache_dir=/tmp/c"});
    std::map<std::string, std::string> by_key;
    for (const auto& i : is) by_key[i.key] = i.message;
    // The cross-field checks (run.deterministic with run.device, data keys with data.source) run in the
    // same pass as trainer.lr's type error (all problems at once, not 4 more after a fix).
    EXPECT_EQ(by_key.size(), 7u) << joined(is);
    for (const char* k : {"trainer.lr", "lora.alpha", "lora.target_modules", "tracking.mlflow_dir",
                          "run.deterministic", "tracking.mlflow.uri", "data.cache_dir"})
        EXPECT_TRUE(by_key.count(k)) << k << "\n" << joined(is);

    is = issues_of(kMinimal +
                   "run:\n  device: cuda\n  deterministic: true\n"
                   "lora:\n  alpha: 8\n  target_modules: [c_proj]\n"
                   "tracking:\n  mlflow_dir: ml\n  mlflow: {uri: \"s3://b/m\"}\n",
                   {"data.cache_dir=/tmp/c", "data.text_field=body"});
    by_key.clear();
    for (const auto& i : is) by_key[i.key] = i.message;
    EXPECT_EQ(by_key.size(), 7u) << joined(is);
    EXPECT_NE(by_key["run.deterministic"].find("run.device: cuda"), std::string::npos) << joined(is);
    EXPECT_NE(by_key["lora.alpha"].find("without adapters (lora.r is 0)"), std::string::npos) << joined(is);
    EXPECT_NE(by_key["lora.target_modules"].find("without adapters"), std::string::npos) << joined(is);
    // A removed key points to where its meaning went; a scheme this version does not speak is named.
    EXPECT_NE(by_key["tracking.mlflow_dir"].find("tracking.mlflow.uri"), std::string::npos) << joined(is);
    EXPECT_NE(by_key["tracking.mlflow.uri"].find("http(s)://"), std::string::npos) << joined(is);
    EXPECT_NE(by_key["data.cache_dir"].find("data.source text, jsonl, hf or chat"), std::string::npos) << joined(is);
    EXPECT_NE(by_key["data.text_field"].find("data.source jsonl or hf"), std::string::npos) << joined(is);
    EXPECT_TRUE(by_key.count("trainer.precision") == 0);
    // bf16 on the CPU is a GEMM precision (kernels/cpu/matmul.h), accepted like fp32.
    EXPECT_NO_THROW(load_config_string(kMinimal + "run:\n  device: cpu\ntrainer:\n  precision: bf16\n", "t.yaml", {}));
    // With trainer.precision auto or bf16, shards read data.cache_dir too: the CPU precision probe's cache.
    for (const char* p : {"auto", "bf16"})
        EXPECT_NO_THROW(load_config_string(kMinimal + "trainer:\n  precision: " + p + "\n", "t.yaml",
                                           {"data.cache_dir=/tmp/c"}))
            << p;
    // Shard keys with a text source: the corpus is tokenized into llm.c shards in data.cache_dir.
    is = issues_of("data:\n  source: text\n  paths: [a.txt]\n  train_shards: x\n  shard_format: nanogpt\n");
    ASSERT_EQ(is.size(), 2u) << joined(is);
    EXPECT_EQ(is[0].key, "data.train_shards");
    EXPECT_EQ(is[1].key, "data.shard_format");
}

// trainer.optimizer picks AdamW or SGD; the other optimizer's hyper-parameters are refused, naming the key
// and both optimizers; an unknown optimizer names the choices; Nesterov needs momentum and no dampening.
TEST(ConfigLoader, OptimizerKeys) {
    const Config sgd = load_config_string(kMinimal + "trainer:\n  optimizer: sgd\n  momentum: 0.8\n  dampening: 0.1\n",
                                          "t.yaml", {});
    EXPECT_EQ(sgd.trainer.optimizer, "sgd");
    EXPECT_DOUBLE_EQ(sgd.trainer.momentum, 0.8);
    EXPECT_DOUBLE_EQ(sgd.trainer.dampening, 0.1);
    EXPECT_FALSE(sgd.trainer.nesterov);
    const Config deflt = load_config_string(kMinimal, "t.yaml", {});
    EXPECT_EQ(deflt.trainer.optimizer, "adamw");  // every existing config keeps AdamW
    EXPECT_DOUBLE_EQ(deflt.trainer.momentum, 0.9);
    EXPECT_TRUE(load_config_string(kMinimal, "t.yaml", {"trainer.optimizer=sgd", "trainer.nesterov=true"})
                    .trainer.nesterov);

    auto is = issues_of(kMinimal + "trainer:\n  optimizer: sgd\n  betas: [0.9, 0.999]\n  eps: 1.0e-6\n");
    ASSERT_EQ(is.size(), 2u) << joined(is);
    EXPECT_EQ(is[0].key, "trainer.betas");
    EXPECT_EQ(is[1].key, "trainer.eps");
    EXPECT_NE(is[0].message.find("is read only with trainer.optimizer adamw, and trainer.optimizer is sgd"),
              std::string::npos) << joined(is);

    is = issues_of(kMinimal, {"trainer.momentum=0.5", "trainer.nesterov=true", "trainer.dampening=0.2"});
    ASSERT_EQ(is.size(), 3u) << joined(is);
    for (const auto& i : is)
        EXPECT_NE(i.message.find("is read only with trainer.optimizer sgd, and trainer.optimizer is adamw"),
                  std::string::npos) << joined(is);

    is = issues_of(kMinimal, {"trainer.optimizer=adam"});
    ASSERT_EQ(is.size(), 1u) << joined(is);
    EXPECT_EQ(is[0].key, "trainer.optimizer");
    EXPECT_NE(is[0].message.find("adamw"), std::string::npos) << joined(is);
    EXPECT_NE(is[0].message.find("sgd"), std::string::npos) << joined(is);

    for (const Sets& bad : {Sets{"trainer.momentum=0"}, Sets{"trainer.dampening=0.5"}}) {
        Sets sets = {"trainer.optimizer=sgd", "trainer.nesterov=true"};
        sets.insert(sets.end(), bad.begin(), bad.end());
        is = issues_of(kMinimal, sets);
        ASSERT_EQ(is.size(), 1u) << joined(is);
        EXPECT_EQ(is[0].key, "trainer.nesterov");
        EXPECT_NE(is[0].message.find("needs trainer.momentum > 0 and trainer.dampening 0"), std::string::npos)
            << joined(is);
    }
    is = issues_of(kMinimal, {"trainer.optimizer=sgd", "trainer.momentum=-0.1"});
    ASSERT_EQ(is.size(), 1u) << joined(is);
    EXPECT_EQ(is[0].key, "trainer.momentum");
}

// data.packing is read only by the chat source; a chat source needs a tokenizer with a chat template and a
// model with rotary positions (packed examples restart their position ids; GPT-2's are learned).
TEST(ConfigLoader, ChatSourceKeys) {
    auto is = issues_of("data:\n  source: text\n  paths: [a.txt]\n  packing: true\n");
    ASSERT_EQ(is.size(), 1u) << joined(is);
    EXPECT_EQ(is[0].key, "data.packing");
    EXPECT_NE(is[0].message.find("data.source chat"), std::string::npos) << joined(is);
    is = issues_of("data:\n  source: chat\n  paths: [a.jsonl]\n  packing: true\n  text_field: body\n");
    std::map<std::string, std::string> by_key;
    for (const auto& i : is) by_key[i.key] = i.message;
    EXPECT_EQ(by_key.size(), 3u) << joined(is);
    EXPECT_NE(by_key["data.text_field"].find("data.source jsonl or hf"), std::string::npos) << joined(is);
    EXPECT_NE(by_key["data.tokenizer"].find("chat template"), std::string::npos) << joined(is);
    EXPECT_NE(by_key["data.source"].find("model.arch: llama"), std::string::npos) << joined(is);
    EXPECT_NO_THROW((void)load_config_string("model:\n  arch: llama\ndata:\n  source: chat\n  paths: [a.jsonl]\n  "
                                             "tokenizer: tok\n",
                                             "<string>"));
    // A model directory names its architecture in config.json, read later: not refused here.
    EXPECT_NO_THROW((void)load_config_string("model:\n  init_from: /models/llama\ndata:\n  source: chat\n  paths: "
                                             "[a.jsonl]\n  tokenizer: tok\n",
                                             "<string>"));
    // For a model only (generate --model), the data section is not checked: chat with packing loads.
    const Config c =
        load_config_string("data:\n  source: chat\n  packing: true\n", "<string>", {}, ConfigUse::kModelOnly);
    EXPECT_EQ(c.data.source, "chat");
    EXPECT_TRUE(c.data.packing);
}

TEST(ConfigLoader, ShardsSourceNeedsShards) {
    auto is = issues_of("model:\n  n_layer: 1\n");
    EXPECT_EQ(is[0].key, "data.train_shards");
    is = issues_of("data:\n  source: text\n");
    EXPECT_EQ(is[0].key, "data.paths");
}

TEST(ConfigLoader, FileProblems) {
    EXPECT_NE(issues_of("")[0].message.find("empty"), std::string::npos);
    EXPECT_NE(issues_of("# only a comment\n")[0].message.find("empty"), std::string::npos);
    EXPECT_NE(issues_of("- a\n- b\n")[0].message.find("top level is a list"), std::string::npos);
    EXPECT_NE(issues_of("just a string\n")[0].message.find("top level is"), std::string::npos);
    EXPECT_NE(issues_of(std::string("a: b\0c", 6))[0].message.find("binary"), std::string::npos);
    EXPECT_NE(issues_of("run:\n  name: \xff\n")[0].message.find("invalid UTF-8"), std::string::npos);
    auto tab = issues_of("run:\n\tname: x\n");
    EXPECT_EQ(tab[0].where, "t.yaml:2:1");
    EXPECT_NE(tab[0].message.find("tab"), std::string::npos);
    auto dup = issues_of(kMinimal + "trainer:\n  lr: 1\n  lr: 2\n");
    EXPECT_EQ(dup[0].key, "trainer.lr");
    EXPECT_NE(dup[0].message.find("duplicate"), std::string::npos);
    auto dupsec = issues_of(kMinimal + "model:\n  n_layer: 3\n");
    EXPECT_EQ(dupsec[0].key, "model");
    EXPECT_NE(issues_of("a: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n")[0]
                  .message.find("deep"),
              std::string::npos);
    std::string deep_block;
    for (int i = 0; i < 1200; ++i) deep_block += std::string(static_cast<std::size_t>(i), ' ') + "k:\n";
    EXPECT_NE(issues_of(deep_block)[0].message.find("deep"), std::string::npos);
    EXPECT_NE(issues_of(std::string(kMaxConfigBytes + 1, '#'))[0].message.find("limited"), std::string::npos);
    EXPECT_NE(issues_of("run: [1, 2\n")[0].message.find("not valid YAML"), std::string::npos);
    EXPECT_NE(issues_of("run: 5\n")[0].message.find("expected a mapping"), std::string::npos);
}

TEST(ConfigLoader, MissingFileIsAnInputError) {
    try {
        load_config_file("/nonexistent/x.yaml");
        FAIL();
    } catch (const ConfigValidationError& e) {
        EXPECT_NE(std::string(e.what()).find("/nonexistent/x.yaml"), std::string::npos);
    }
}

TEST(ConfigLoader, SetOverrides) {
    Config c = load_config_string(
        kMinimal, "t.yaml", {"trainer.lr=3e-4", "trainer.betas=[0.8, 0.99]", "run.name=abc", "schema_version=1"});
    EXPECT_DOUBLE_EQ(c.trainer.lr, 3e-4);
    EXPECT_DOUBLE_EQ(c.trainer.betas[0], 0.8);
    EXPECT_EQ(c.run.name, "abc");
    c = load_config_string("data:\n  source: text\n", "t.yaml", {"data.paths=[a.txt, b.txt]"});
    EXPECT_EQ(c.data.paths.size(), 2u);

    auto is = issues_of(kMinimal, {"trainer.lr=abc"});
    EXPECT_EQ(is[0].where, "--set trainer.lr=abc");
    is = issues_of(kMinimal, {"trainer.lr_warmup=3"});
    EXPECT_NE(is[0].message.find("trainer.warmup_steps"), std::string::npos);
    is = issues_of(kMinimal, {"novalue"});
    EXPECT_NE(is[0].message.find("KEY=VALUE"), std::string::npos);
    // Overrides go through the cross-field checks too.
    is = issues_of(kMinimal, {"trainer.min_lr=1", "trainer.lr=0.5"});
    EXPECT_EQ(is[0].key, "trainer.min_lr");
    EXPECT_EQ(is[0].where, "--set trainer.min_lr=1");
}

// A misspelt key's value never reached the key it meant: no second error computed from that key's default
// (n_heads: 8 with d_model 64 adds no "d_model not divisible by n_head" for a default the user never wrote).
TEST(ConfigLoader, MisspeltKeyGivesNoFollowOnErrorFromTheDefault) {
    const std::string yaml = R"(schema_version: 1
model:
  n_layer: 2
  n_heads: 5
  d_model: 40
  block_size: 32
data:
  train_shards: data/train_*.bin
  val_shards: data/val_*.bin
)";
    auto is = issues_of(yaml);
    ASSERT_EQ(is.size(), 1u) << joined(is);
    EXPECT_EQ(is[0].key, "model.n_heads");
    EXPECT_NE(is[0].message.find("did you mean `model.n_head`?"), std::string::npos) << is[0].message;
    // Written correctly as well, the real key is checked as usual.
    is = issues_of(yaml + "\n", {"model.n_head=3"});
    EXPECT_EQ(is.size(), 2u) << joined(is);
}

// trainer.min_lr follows trainer.lr when not written: 0.1 x lr (docs/hf_models.md's lr 2e-5 validates).
TEST(ConfigLoader, MinLrDefaultsToATenthOfLr) {
    Config c = load_config_string(kMinimal, "t.yaml", {"trainer.lr=2.0e-5"});
    EXPECT_DOUBLE_EQ(c.trainer.min_lr, 2.0e-6);
    EXPECT_DOUBLE_EQ(c.resolved["trainer"]["min_lr"].get<double>(), 2.0e-6);
    EXPECT_FALSE(c.wrote("trainer.min_lr"));
    c = load_config_string(kMinimal, "t.yaml");
    EXPECT_DOUBLE_EQ(c.trainer.min_lr, 0.1 * c.trainer.lr);
    c = load_config_string(kMinimal, "t.yaml", {"trainer.lr=2.0e-5", "trainer.min_lr=0"});
    EXPECT_EQ(c.trainer.min_lr, 0.0);
    // Written above lr it is still refused.
    EXPECT_EQ(issues_of(kMinimal, {"trainer.lr=2.0e-5", "trainer.min_lr=1.0e-4"})[0].key, "trainer.min_lr");
}

// Both lengths written: trainer.max_steps wins, epochs becomes 0 everywhere, and a warning names both.
TEST(ConfigLoader, WrittenMaxStepsWinsOverEpochs) {
    const std::string images = R"(schema_version: 1
model: {arch: mlp, image_size: 8, num_classes: 4, hidden_sizes: [16]}
trainer: {epochs: 5}
data: {source: idx, train_images: a, train_labels: b, test_images: c, test_labels: d}
)";
    Config c = load_config_string(images, "t.yaml", {"trainer.max_steps=7"});
    EXPECT_EQ(c.trainer.max_steps, 7);
    EXPECT_EQ(c.trainer.epochs, 0);
    EXPECT_EQ(c.resolved["trainer"]["epochs"], 0);
    // The second warning: the default warmup (100 steps) shortened to the 7.
    ASSERT_EQ(c.warnings.size(), 2u);
    EXPECT_NE(c.warnings[0].find("trainer.max_steps (7, --set trainer.max_steps=7) and trainer.epochs (5, t.yaml:3:"),
              std::string::npos)
        << c.warnings[0];
    EXPECT_NE(c.warnings[0].find("trainer.max_steps wins"), std::string::npos) << c.warnings[0];
    // A language model has no epochs: trainer.epochs is refused by name even beside a written max_steps.
    auto is = issues_of(kMinimal, {"trainer.epochs=2", "trainer.max_steps=3"});
    ASSERT_EQ(is.size(), 1u) << joined(is);
    EXPECT_EQ(is[0].key, "trainer.epochs");
    c = load_config_string(images, "t.yaml");  // epochs alone decide
    EXPECT_EQ(c.trainer.epochs, 5);
    EXPECT_TRUE(c.warnings.empty());
    // Its resolved config, printed whole (max_steps at the default beside epochs), loads as it was.
    const Config again = load_config_string(to_yaml(c.resolved), "again.yaml");
    EXPECT_EQ(again.trainer.epochs, 5);
    EXPECT_EQ(again.resolved, c.resolved);
}

// A warmup longer than the run is shortened to it, as a warning naming where it came from (so
// `--set trainer.max_steps=12` on the default preset runs).
TEST(ConfigLoader, WarmupLongerThanTheRunIsShortenedWithAWarning) {
    Config c = load_config_string(kMinimal, "t.yaml", {"trainer.warmup_steps=5000", "trainer.max_steps=10"});
    EXPECT_EQ(c.trainer.warmup_steps, 10);
    EXPECT_EQ(c.resolved["trainer"]["warmup_steps"], 10);
    ASSERT_EQ(c.warnings.size(), 1u);
    EXPECT_NE(c.warnings[0].find("trainer.warmup_steps (5000, --set trainer.warmup_steps=5000)"), std::string::npos)
        << c.warnings[0];
    EXPECT_NE(c.warnings[0].find("shortened to 10"), std::string::npos) << c.warnings[0];
    c = load_config_string(kMinimal, "t.yaml", {"trainer.warmup_steps=10", "trainer.max_steps=10"});
    EXPECT_EQ(c.trainer.warmup_steps, 10);
    EXPECT_TRUE(c.warnings.empty());
}

// Cross-field problems come in the same pass as type errors (not after every value has its type), except
// those that would compare with a refused value's default.
TEST(ConfigLoader, CrossFieldProblemsInTheSamePassAsTypeErrors) {
    auto is = issues_of(kMinimal, {"trainer.lr=abc", "trainer.min_lr=5", "run.name=bad name", "dist.backend=nccl",
                                   "trainer.eval_steps=-3"});
    std::set<std::string> keys;
    for (const auto& i : is) keys.insert(i.key);
    EXPECT_TRUE(keys.count("trainer.lr"));
    EXPECT_TRUE(keys.count("trainer.eval_steps"));
    EXPECT_TRUE(keys.count("run.name"));
    EXPECT_TRUE(keys.count("dist.backend"));
    EXPECT_FALSE(keys.count("trainer.min_lr")) << "compared with the default of a refused trainer.lr";
    EXPECT_EQ(is.size(), 4u);
}

TEST(ConfigLoader, YamlOutputRoundTrips) {
    Config c = load_config_string(kMinimal, "t.yaml", {"trainer.lr=0.0003", "model.dropout=0.1", "run.name=x-y.z"});
    for (bool comments : {true, false}) {
        Config again = load_config_string(to_yaml(c.resolved, comments), "again.yaml");
        EXPECT_EQ(again.resolved, c.resolved) << to_yaml(c.resolved, comments);
    }
}

}  // namespace
}  // namespace llmt::config
