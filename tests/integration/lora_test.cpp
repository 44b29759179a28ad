// LoRA through the real binary: a tiny LLaMA base exported as a Hugging Face directory, then
// `llmtrain train` with lora.r on it: the checkpoint holds only the adapters (PEFT names) beside an
// adapter_config.json and names its base; resume is bit-identical; `export` writes a PEFT adapter
// directory; `merge` folds it into the base and the merged model evaluates as base + adapter does;
// lora.init_from continues from the exported adapter; another base, or a PEFT feature we do not run,
// is refused naming what differs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/fs.h"
#include "core/safetensors.h"
#include "support/subprocess.h"
#include "support/train_fixture.h"

namespace {

namespace fs = std::filesystem;
using llmt::testing::llmtrain_bin;
using llmt::testing::ProcResult;
using llmt::testing::run_process;

class LoraTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        root_ = fs::temp_directory_path() / ("llmt_lora_" + std::to_string(::getpid()));
        fs::create_directories(root_);
        auto prep = llmt::testing::prepare_synthetic_shards(root_);
        ASSERT_EQ(prep.exit_code, 0) << prep.err;
        data_ = "data: {train_shards: " + (root_ / "shards/train_*.bin").string() + ", val_shards: " +
                (root_ / "shards/val_*.bin").string() + "}\n";
        std::ofstream(root_ / "base.yaml")
            << "run: {name: b, seed: 3, device: cpu, threads: 1, deterministic: true}\n"
               "model: {arch: llama, n_layer: 2, n_head: 4, n_kv_head: 2, d_model: 64, d_ff: 96, block_size: 32,\n"
               "        vocab_size: 50257, tie_embeddings: false}\n"
               "trainer: {max_steps: 4, micro_batch_size: 2, lr: 3.0e-3, warmup_steps: 1, eval_every_steps: 0, "
               "eval_steps: 2}\n"
            << data_;
        ProcResult r = llmtrain({"train", "--config", (root_ / "base.yaml").string(), "--set",
                                 "output.root_dir=" + (root_ / "runs").string(), "--set", "output.run_id=base"});
        ASSERT_EQ(r.exit_code, 0) << r.err;
        r = llmtrain({"export", "--checkpoint", (root_ / "runs/base").string(), "--out", (root_ / "base_hf").string(),
                      "--dtype", "fp32"});
        ASSERT_EQ(r.exit_code, 0) << r.err;
        std::ofstream(root_ / "lora.yaml")
            << "run: {name: l, seed: 5, device: cpu, threads: 1, deterministic: true}\n"
               "model: {init_from: " << (root_ / "base_hf").string() << "}\n"
               "lora: {r: 4, alpha: 8, target_modules: [q_proj, v_proj, down_proj]}\n"
               "trainer: {max_steps: 8, micro_batch_size: 2, grad_accum_steps: 2, lr: 1.0e-2, warmup_steps: 1, "
               "eval_every_steps: 0, eval_steps: 2, save_every_steps: 4, keep_last: 3, log_every_steps: 1}\n"
            << data_;
    }
    static void TearDownTestSuite() { fs::remove_all(root_); }

    static ProcResult llmtrain(std::vector<std::string> args) {
        args.insert(args.begin(), llmtrain_bin());
        return run_process(args, "", 600);
    }
    static ProcResult train_lora(std::vector<std::string> extra) {
        std::vector<std::string> args = {"train", "--config", (root_ / "lora.yaml").string(), "--set",
                                         "output.root_dir=" + (root_ / "runs").string()};
        args.insert(args.end(), extra.begin(), extra.end());
        return llmtrain(args);
    }
    static std::vector<double> losses(const fs::path& run) {
        std::vector<double> v;
        for (const auto& m : llmt::testing::read_metrics(run / "metrics.jsonl"))
            if (m.contains("loss")) v.push_back(m["loss"]);
        return v;
    }
    static double val_loss(const ProcResult& r) { return nlohmann::json::parse(r.out)["val_loss"].get<double>(); }

    static fs::path root_;
    static std::string data_;
};
fs::path LoraTest::root_;
std::string LoraTest::data_;

TEST_F(LoraTest, CheckpointHoldsOnlyAdaptersAndResumesBitIdentically) {
    ProcResult r = train_lora({"--set", "output.run_id=straight"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("lora: r 4, alpha 8 (scale 2), 6 modules adapted"), std::string::npos) << r.err;
    const fs::path step = root_ / "runs/straight/checkpoints/step_8";
    const auto model = llmt::SafetensorsFile::open(step / "model.safetensors");
    // q_proj and v_proj of 2 layers, down_proj of 2: A and B each, PEFT's names and shapes.
    EXPECT_EQ(model.size(), 12u);
    EXPECT_EQ(model.info("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight").shape,
              (llmt::Shape{4, 64}));
    EXPECT_EQ(model.info("base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight").shape,
              (llmt::Shape{32, 4}));  // 2 KV heads x 16
    EXPECT_EQ(model.info("base_model.model.model.layers.1.mlp.down_proj.lora_A.weight").shape, (llmt::Shape{4, 96}));
    const auto cfg = nlohmann::json::parse(llmt::read_file(step / "adapter_config.json"));
    EXPECT_EQ(cfg["peft_type"], "LORA");
    EXPECT_EQ(cfg["r"], 4);
    EXPECT_EQ(cfg["target_modules"], (nlohmann::json{"down_proj", "q_proj", "v_proj"}));
    const auto state = nlohmann::json::parse(llmt::read_file(step / "state.json"));
    ASSERT_TRUE(state.contains("lora_base"));
    EXPECT_EQ(state["lora_base"]["sha256"].get<std::string>().size(), 64u);
    // The loss moves: the adapters train (B starts at zero, so step 1 is the base's own loss).
    const auto straight = losses(root_ / "runs/straight");
    ASSERT_EQ(straight.size(), 8u);
    EXPECT_LT(straight.back(), straight.front());

    r = train_lora({"--set", "output.run_id=halves", "--stop-at-step", "4"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = train_lora({"--set", "output.run_id=halves", "--resume", "halves"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(losses(root_ / "runs/halves"), straight);
    for (const char* f : {"model.safetensors", "optimizer.safetensors"})
        EXPECT_EQ(llmt::read_file(step / f), llmt::read_file(root_ / "runs/halves/checkpoints/step_8" / f))
            << f << " differs between 8 straight steps and 4 + resume + 4";
}

TEST_F(LoraTest, ExportMergeAndInitFromAgreeWithTheRun) {
    ProcResult r = train_lora({"--set", "output.run_id=exp"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const fs::path run = root_ / "runs/exp";
    r = llmtrain({"eval", "--json", "--config", (root_ / "lora.yaml").string(), "--checkpoint", run.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const double lora_val = val_loss(r);

    const fs::path adapter = root_ / "adapter";
    r = llmtrain({"export", "--checkpoint", run.string(), "--out", adapter.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ASSERT_TRUE(fs::exists(adapter / "adapter_config.json"));
    const auto a = llmt::SafetensorsFile::open(adapter / "adapter_model.safetensors");
    EXPECT_EQ(a.size(), 12u);
    EXPECT_EQ(nlohmann::json::parse(llmt::read_file(adapter / "adapter_config.json"))["base_model_name_or_path"],
              (root_ / "base_hf").string());

    const fs::path merged = root_ / "merged";
    r = llmtrain({"merge", "--model", (root_ / "base_hf").string(), "--adapter", adapter.string(), "--out",
                  merged.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // The merged directory is complete: the base's tokenizer (GPT-2's two files, as its export wrote them).
    for (const char* f : {"vocab.json", "merges.txt", "tokenizer_config.json"}) {
        ASSERT_TRUE(fs::exists(merged / f)) << f;
        EXPECT_EQ(llmt::read_file(merged / f), llmt::read_file(root_ / "base_hf" / f)) << f;
    }
    std::ofstream(root_ / "merged.yaml") << "run: {name: m, seed: 1, device: cpu, threads: 1}\n"
                                         << "model: {init_from: " << merged.string() << "}\n"
                                         << "trainer: {micro_batch_size: 2, eval_steps: 2}\n"
                                         << data_;
    r = llmtrain({"eval", "--json", "--config", (root_ / "merged.yaml").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // W + scale B A folded in fp32 (then stored fp32: the base is fp32) against the unmerged sum of two
    // GEMMs: the same function to fp32 rounding of the sums (~1e-7 relative per op, a few ops deep).
    EXPECT_NEAR(val_loss(r), lora_val, 1e-5 * lora_val);

    // lora.init_from: the same adapters continue (eval before any step equals the run's).
    std::ofstream(root_ / "cont.yaml") << "run: {name: c, seed: 9, device: cpu, threads: 1}\n"
                                       << "model: {init_from: " << (root_ / "base_hf").string() << "}\n"
                                       << "lora: {r: 4, init_from: " << adapter.string() << "}\n"
                                       << "trainer: {micro_batch_size: 2, eval_steps: 2}\n"
                                       << data_;
    r = llmtrain({"eval", "--json", "--config", (root_ / "cont.yaml").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NEAR(val_loss(r), lora_val, 1e-6 * lora_val);
}

TEST_F(LoraTest, AnotherBaseOrAnUnsupportedAdapterIsRefused) {
    // A base directory whose content changes under the run: the same path and shapes, other weights.
    const fs::path base = root_ / "base_copy";
    fs::copy(root_ / "base_hf", base);
    ProcResult r = train_lora({"--set", "output.run_id=ref", "--set", "trainer.max_steps=2", "--set",
                               "model.init_from=" + base.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = llmtrain({"train", "--config", (root_ / "base.yaml").string(), "--set",
                  "output.root_dir=" + (root_ / "runs").string(), "--set", "output.run_id=base2", "--set",
                  "run.seed=4"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    fs::remove_all(base);
    r = llmtrain(
        {"export", "--checkpoint", (root_ / "runs/base2").string(), "--out", base.string(), "--dtype", "fp32"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = train_lora({"--set", "output.run_id=ref", "--set", "trainer.max_steps=4", "--set",
                    "model.init_from=" + base.string(), "--resume", "ref"});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("trained on another base model"), std::string::npos) << r.err;

    // A DoRA adapter is not plain LoRA: refused naming the file and field.
    const fs::path dora = root_ / "dora";
    fs::create_directories(dora);
    llmt::write_file_atomic(
        dora / "adapter_config.json",
        R"({"peft_type": "LORA", "r": 4, "lora_alpha": 8, "target_modules": ["q_proj"], "use_dora": true})");
    r = train_lora({"--set", "output.run_id=dora", "--set", "lora.init_from=" + dora.string()});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("use_dora"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find((dora / "adapter_config.json").string()), std::string::npos) << r.err;
    // A module name the model does not have.
    r = train_lora({"--set", "output.run_id=bad", "--set", "lora.target_modules=[q_proj, c_attn]"});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("lora.target_modules: 'c_attn' matches no linear module"), std::string::npos) << r.err;
}

}  // namespace

namespace {

// Chat fine-tuning data (data.source: chat) through the trainer: Llama 3's tokenizer and
// template (data/tokenizers/llama3, installed by setup), packed rows with per-example positions, LoRA on a
// scratch base. The step's loss averages over its target tokens however the rows are split into
// micro-batches, and resume is bit-identical (the chat loader's position is in the checkpoint).
class ChatTrainTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        root_ = fs::temp_directory_path() / ("llmt_chat_train_" + std::to_string(::getpid()));
        fs::create_directories(root_);
        const fs::path tok = fs::path(LLMT_SOURCE_DIR) / "data/tokenizers/llama3";
        ASSERT_TRUE(fs::exists(tok / "tokenizer.json")) << "run scripts/setup.sh (it installs " << tok << ")";
        std::string qa;  // 200 short conversations, one or two turns
        for (int i = 0; i < 200; ++i) {
            qa += R"({"messages": [{"role": "user", "content": "What is )" + std::to_string(i) + " plus " +
                  std::to_string(i % 7) + R"(?"}, {"role": "assistant", "content": "It is )" +
                  std::to_string(i + i % 7) + ".\"}";
            if (i % 3 == 0)
                qa += R"(, {"role": "user", "content": "And doubled?"}, {"role": "assistant", "content": "Then )" +
                      std::to_string(2 * (i + i % 7)) + ".\"}";
            qa += "]}\n";
        }
        llmt::write_file_atomic(root_ / "qa.jsonl", qa);
        std::ofstream(root_ / "chat.yaml")
            << "run: {name: c, seed: 2, device: cpu, threads: 1, deterministic: true}\n"
               "model: {arch: llama, n_layer: 2, n_head: 4, n_kv_head: 2, d_model: 64, d_ff: 128, block_size: 128,\n"
               "        vocab_size: 128256, tie_embeddings: true, rope_theta: 500000.0}\n"
               "lora: {r: 4, alpha: 8, target_modules: [all-linear]}\n"
               "trainer: {max_steps: 4, micro_batch_size: 4, grad_accum_steps: 2, lr: 1.0e-2, warmup_steps: 1,\n"
               "          log_every_steps: 1, eval_every_steps: 0, save_every_steps: 2, keep_last: 3}\n"
               "data: {source: chat, paths: ["
            << (root_ / "qa.jsonl").string() << "], tokenizer: " << tok.string()
            << ", packing: true, val_fraction: 0.05, cache_dir: " << (root_ / "cache").string() << "}\n";
    }
    static void TearDownTestSuite() { fs::remove_all(root_); }
    static ProcResult train(std::vector<std::string> extra) {
        std::vector<std::string> args = {llmtrain_bin(), "train", "--config", (root_ / "chat.yaml").string(), "--set",
                                         "output.root_dir=" + (root_ / "runs").string()};
        args.insert(args.end(), extra.begin(), extra.end());
        return run_process(args, "", 600);
    }
    static std::vector<double> losses(const std::string& run) {
        std::vector<double> v;
        for (const auto& m : llmt::testing::read_metrics(root_ / "runs" / run / "metrics.jsonl"))
            if (m.contains("loss")) v.push_back(m["loss"]);
        return v;
    }
    static fs::path root_;
};
fs::path ChatTrainTest::root_;

TEST_F(ChatTrainTest, LossAveragesOverTargetsAndResumeIsExact) {
    ProcResult r = train({"--set", "output.run_id=k2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("data: "), std::string::npos) << r.err;
    // The same 8 rows a step as one micro-batch: the same mean over the step's targets.
    r = train(
        {"--set", "output.run_id=k1", "--set", "trainer.micro_batch_size=8", "--set", "trainer.grad_accum_steps=1"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto k2 = losses("k2"), k1 = losses("k1");
    ASSERT_EQ(k2.size(), 4u);
    ASSERT_EQ(k1.size(), 4u);
    // fp32 sums over 4 or 8 rows in another order; the weights 1/n are exact in both.
    for (size_t i = 0; i < k2.size(); ++i) EXPECT_NEAR(k2[i], k1[i], 2e-5 * k1[i]) << "step " << i + 1;

    r = train({"--set", "output.run_id=half", "--stop-at-step", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = train({"--set", "output.run_id=half", "--resume", "half"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(losses("half"), k2);
}

}  // namespace
