// `llmtrain chat` and the Llama 3 tokenizer end to end through the real binary: shards prepared with
// Meta's Llama 3 tokenizer.json (uint32 ids), a tiny LLaMA with its 128,256-id vocabulary trained a few
// steps, then chat on a pipe (one answer per turn, seeded), generation stopping at an eos id that a model
// directory's generation_config.json lists, --print-prompt against the template by hand, docs/lora.md's
// worked example in small (also from a Parquet `messages` dataset), and the error for an unknown chat template.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/fs.h"
#include "support/subprocess.h"
#include "support/train_fixture.h"

namespace {

namespace fs = std::filesystem;
using llmt::testing::llmtrain_bin;
using llmt::testing::ProcResult;
using llmt::testing::run_process;

const fs::path kLlama3 = LLMT_SOURCE_DIR "/data/tokenizers/llama3";

class ChatTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        root_ = fs::temp_directory_path() / ("llmt_chat_" + std::to_string(::getpid()));
        fs::create_directories(root_);
        // A model directory: Meta's tokenizer files, and a generation_config.json written per test.
        model_dir_ = root_ / "model";
        fs::create_directories(model_dir_);
        for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) fs::copy_file(kLlama3 / f, model_dir_ / f);
        std::string corpus;
        for (int d = 0; d < 200; ++d)
            corpus += "User asks about item " + std::to_string(d) + ". The answer is yes.\n\n";
        llmt::write_file_atomic(root_ / "corpus.txt", corpus);
        auto r =
            run_process({llmtrain_bin(), "data", "prepare", "--input", (root_ / "corpus.txt").string(), "--tokenizer",
                         model_dir_.string(), "--out", (root_ / "shards").string(), "--val-fraction", "0.1"},
                        "", 300);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        std::ofstream(root_ / "tiny.yaml")
            << "run: {name: c, seed: 3, device: cpu, threads: 1}\n"
               "model: {arch: llama, n_layer: 1, n_head: 2, n_kv_head: 1, d_model: 32, d_ff: 64, block_size: 64, "
               "vocab_size: 128256}\n"
               "trainer: {max_steps: 10, micro_batch_size: 2, lr: 3.0e-3, min_lr: 3.0e-4, warmup_steps: 2, "
               "eval_every_steps: 0}\n"
            << "data: {tokenizer: " << model_dir_.string()
            << ", train_shards: " << (root_ / "shards/train_*.bin").string()
            << ", val_shards: " << (root_ / "shards/val_*.bin").string() << "}\n";
        r = run_process({llmtrain_bin(), "train", "--config", (root_ / "tiny.yaml").string(), "--set",
                         "output.root_dir=" + (root_ / "runs").string(), "--set", "output.run_id=chat"},
                        "", 600);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        run_ = root_ / "runs/chat";
    }
    static void TearDownTestSuite() { fs::remove_all(root_); }

    static ProcResult llmtrain(std::vector<std::string> args, const std::string& input = "") {
        args.insert(args.begin(), llmtrain_bin());
        return run_process(args, input, 300);
    }
    static fs::path root_, run_, model_dir_;
};
fs::path ChatTest::root_, ChatTest::run_, ChatTest::model_dir_;

TEST_F(ChatTest, PipedTurnsAreAnsweredAndSeeded) {
    const std::vector<std::string> args = {"chat", "--model", run_.string(), "--max-new-tokens", "6", "--seed", "5",
                                           "--temperature", "1.0", "--top-p", "0.95"};
    auto a = llmtrain(args, "Hello there\nWhat is item 7?\n");
    ASSERT_EQ(a.exit_code, 0) << a.err;
    auto b = llmtrain(args, "Hello there\nWhat is item 7?\n");
    EXPECT_EQ(a.out, b.out);
    // Two turns, two answers, each ended by a newline (at most 6 tokens each).
    EXPECT_GE(std::count(a.out.begin(), a.out.end(), '\n'), 2) << a.out;
    EXPECT_FALSE(a.out.empty());
}

// Greedy generation's first token, then that token as generation_config.json's eos_token_id: the same
// run now stops before printing anything (and says where it stopped).
TEST_F(ChatTest, GenerateStopsAtEveryEosIdOfGenerationConfig) {
    const std::vector<std::string> base = {"generate", "--checkpoint", run_.string(), "--prompt", "The answer",
                                           "--temperature", "0", "--tokenizer", model_dir_.string()};
    auto args = base;
    args.insert(args.end(), {"--max-new-tokens", "1"});
    auto one = llmtrain(args);
    ASSERT_EQ(one.exit_code, 0) << one.err;
    ASSERT_EQ(one.out.rfind("The answer", 0), 0u) << one.out;
    const std::string first = one.out.substr(10, one.out.size() - 11);  // the prompt, one token, "\n"
    auto ids = llmtrain({"tokenize", "--tokenizer", model_dir_.string(), "--json"}, first);
    ASSERT_EQ(ids.exit_code, 0) << ids.err;
    const std::string id = ids.out.substr(1, ids.out.size() - 3);  // "[ID]\n"
    ASSERT_EQ(id.find(','), std::string::npos) << "one token's bytes are one token again: " << ids.out;
    std::ofstream(model_dir_ / "generation_config.json") << "{\"eos_token_id\": [128001, " << id << ", 128009]}\n";
    args = base;
    args.insert(args.end(), {"--max-new-tokens", "20"});
    auto stopped = llmtrain(args);
    fs::remove(model_dir_ / "generation_config.json");
    ASSERT_EQ(stopped.exit_code, 0) << stopped.err;
    EXPECT_EQ(stopped.out, "The answer\n");
    EXPECT_NE(stopped.err.find("stopped at " + first), std::string::npos) << stopped.err;
    // A malformed eos id names the file and the field.
    std::ofstream(model_dir_ / "generation_config.json") << "{\"eos_token_id\": [\"x\"]}\n";
    auto bad = llmtrain(args);
    fs::remove(model_dir_ / "generation_config.json");
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_NE(bad.err.find("generation_config.json: eos_token_id"), std::string::npos) << bad.err;
}

TEST_F(ChatTest, PrintPromptRendersMetasTemplate) {
    auto r = llmtrain({"chat", "--print-prompt", "--tokenizer", model_dir_.string()},
                      R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": " Hi "},)"
                      R"( {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Bye"}])");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out,
              "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
              "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>"
              "\n\nHello.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

// The run exported as a Hugging Face model directory (fp32: the same weights): the export carries the run's
// tokenizer (Meta's tokenizer.json and tokenizer_config.json with its chat template) and its special ids,
// so chat --model EXPORT finds tokenizer and template there and answers exactly as from the run.
TEST_F(ChatTest, HuggingFaceModelDirectoryAnswersAsTheRun) {
    const fs::path exported = root_ / "export";
    auto r = llmtrain({"export", "--checkpoint", run_.string(), "--out", exported.string(), "--dtype", "fp32"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
        EXPECT_EQ(llmt::read_file(kLlama3 / f), llmt::read_file(exported / f)) << f;
    const auto cfg = nlohmann::json::parse(llmt::read_file(exported / "config.json"));
    EXPECT_EQ(cfg["bos_token_id"], 128000);
    EXPECT_EQ(cfg["eos_token_id"], 128001);
    EXPECT_EQ(cfg["pad_token_id"], 128001);
    const auto gen = nlohmann::json::parse(llmt::read_file(exported / "generation_config.json"));
    EXPECT_EQ(gen["eos_token_id"], nlohmann::json({128001, 128009}));  // with the template's <|eot_id|>
    EXPECT_EQ(gen["bos_token_id"], 128000);
    // Every checkpoint directory is such a directory too.
    for (const char* f : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"})
        EXPECT_TRUE(fs::exists(run_ / "checkpoints/step_10" / f)) << f;
    const std::vector<std::string> opts = {"--max-new-tokens", "8", "--seed", "9", "--set", "run.threads=1"};
    auto from = [&](const fs::path& m) {
        std::vector<std::string> args = {"chat", "--model", m.string()};
        args.insert(args.end(), opts.begin(), opts.end());
        return llmtrain(args, "Hello\nWhat is item 3?\n");
    };
    auto a = from(run_), b = from(exported);
    ASSERT_EQ(a.exit_code, 0) << a.err;
    ASSERT_EQ(b.exit_code, 0) << b.err;
    EXPECT_EQ(a.out, b.out);
    // On a pipe each answer says on stderr what ended it (8 tokens at most here: a stop id or the limit).
    EXPECT_NE(a.err.find("chat: answer of "), std::string::npos) << a.err;
    EXPECT_NE(a.err.find(" tokens ended by "), std::string::npos) << a.err;
}

// generate --model EXPORT decodes with the export's own tokenizer: the same greedy text as the run (not
// GPT-2's tokenizer, which would print other text with exit 0). A model directory without tokenizer files
// refuses text naming --tokenizer, while ids in and out need none; --model on the run itself works too.
TEST_F(ChatTest, GenerateFromTheExportPrintsTheRunsText) {
    const fs::path exported = root_ / "export_gen";
    auto r = llmtrain({"export", "--checkpoint", run_.string(), "--out", exported.string(), "--dtype", "fp32"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::vector<std::string> greedy = {"--prompt", "User asks about item", "--temperature", "0", "-n", "12"};
    auto gen = [&](std::vector<std::string> a) {
        a.insert(a.begin(), "generate");
        a.insert(a.end(), greedy.begin(), greedy.end());
        return llmtrain(a);
    };
    auto ck = gen({"--checkpoint", run_.string()});
    auto ex = gen({"--model", exported.string()});
    auto run_dir = gen({"--model", run_.string()});
    ASSERT_EQ(ck.exit_code, 0) << ck.err;
    ASSERT_EQ(ex.exit_code, 0) << ex.err;
    ASSERT_EQ(run_dir.exit_code, 0) << run_dir.err;
    EXPECT_EQ(ck.out, ex.out);
    EXPECT_EQ(ck.out, run_dir.out);
    EXPECT_EQ(ck.out.rfind("User asks about item", 0), 0u) << ck.out;

    const fs::path bare = root_ / "bare";
    fs::create_directories(bare);
    for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(exported / f, bare / f);
    auto refused = gen({"--model", bare.string()});
    EXPECT_EQ(refused.exit_code, 2) << refused.out;
    EXPECT_NE(refused.err.find("has no tokenizer files"), std::string::npos) << refused.err;
    EXPECT_NE(refused.err.find("--tokenizer"), std::string::npos) << refused.err;
    EXPECT_TRUE(refused.out.empty()) << refused.out;
    auto chat_refused = llmtrain({"chat", "--model", bare.string()}, "hi\n");
    EXPECT_EQ(chat_refused.exit_code, 2) << chat_refused.out;
    EXPECT_NE(chat_refused.err.find("has no tokenizer files"), std::string::npos) << chat_refused.err;
    auto with_tok = gen({"--model", bare.string(), "--tokenizer", kLlama3.string()});
    ASSERT_EQ(with_tok.exit_code, 0) << with_tok.err;
    EXPECT_EQ(with_tok.out, ck.out);
    auto ids = llmtrain(
        {"generate", "--model", bare.string(), "--prompt-ids", "128000,1502", "--temperature", "0", "-n", "3"});
    EXPECT_EQ(ids.exit_code, 0) << ids.err;
    EXPECT_EQ(ids.out.rfind("128000 1502", 0), 0u) << ids.out;
}

// docs/lora.md's worked example in small: the run exported as a base, LoRA trained on it, the adapter exported
// and merged by `llmtrain merge`; the merged directory carries the base's tokenizer and chat template, so
// `chat --model MERGED` answers, and as the LoRA run itself does (its adapters merged for decoding the same
// way, in fp32).
TEST_F(ChatTest, MergedLoraModelChatsAsTheLoraRun) {
    const fs::path base = root_ / "lora_base", adapter = root_ / "lora_adapter", merged = root_ / "lora_merged";
    auto r = llmtrain({"export", "--checkpoint", run_.string(), "--out", base.string(), "--dtype", "fp32"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::ofstream(root_ / "lora.yaml")
        << "run: {name: l, seed: 4, device: cpu, threads: 1}\n"
        << "model: {init_from: " << base.string() << ", block_size: 64}\n"
        << "lora: {r: 4, alpha: 8, target_modules: [all-linear]}\n"
           "trainer: {max_steps: 4, micro_batch_size: 2, lr: 5.0e-3, min_lr: 5.0e-4, warmup_steps: 1, "
           "eval_every_steps: 0}\n"
        << "data: {train_shards: " << (root_ / "shards/train_*.bin").string() << "}\n";
    r = llmtrain({"train", "--config", (root_ / "lora.yaml").string(), "--set",
                  "output.root_dir=" + (root_ / "runs").string(), "--set", "output.run_id=lora"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const fs::path lora_run = root_ / "runs/lora";
    r = llmtrain({"export", "--checkpoint", lora_run.string(), "--out", adapter.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = llmtrain({"merge", "--model", base.string(), "--adapter", adapter.string(), "--out", merged.string(),
                  "--dtype", "fp32"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
        EXPECT_EQ(llmt::read_file(kLlama3 / f), llmt::read_file(merged / f)) << f;
    const std::vector<std::string> opts = {"--max-new-tokens", "8", "--seed", "9", "--set", "run.threads=1"};
    auto from = [&](const fs::path& m) {
        std::vector<std::string> args = {"chat", "--model", m.string()};
        args.insert(args.end(), opts.begin(), opts.end());
        return llmtrain(args, "Hello\nWhat is item 3?\n");
    };
    auto a = from(merged), b = from(lora_run);
    ASSERT_EQ(a.exit_code, 0) << a.err;
    ASSERT_EQ(b.exit_code, 0) << b.err;
    EXPECT_NE(a.err.find("chat: answer of "), std::string::npos) << a.err;
    EXPECT_EQ(a.out, b.out);
}

// docs/lora.md's worked example from a Parquet `messages` dataset, in small: the same conversations as chat
// JSONL and as a hub-style dataset folder (data/train-00000-of-00001.parquet, written by hyparquet-writer, an
// independent writer) train the same LoRA run step for step; the Parquet run's adapter, exported and merged
// into the base, chats as the JSONL run does.
TEST_F(ChatTest, LoraChatExampleRunsFromParquetMessagesAsFromJsonl) {
    const fs::path writer = LLMT_SOURCE_DIR "/tests/data/hf_writer";
    ASSERT_TRUE(fs::exists(writer / "node_modules/hyparquet-writer"))
        << "run scripts/setup.sh (setup.d/61-hf-writers.sh)";
    const fs::path base = root_ / "pq_base", jsonl = root_ / "qa.jsonl", dataset = root_ / "hf/qa";
    auto r = llmtrain({"export", "--checkpoint", run_.string(), "--out", base.string(), "--dtype", "fp32"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string lines;
    for (int i = 0; i < 48; ++i) {
        const std::string system = i % 4 == 0 ? R"({"role": "system", "content": "Answer briefly."}, )" : "";
        lines += R"({"messages": [)" + system + R"({"role": "user", "content": "What is item )" + std::to_string(i) +
                 R"(?"}, {"role": "assistant", "content": "Item )" + std::to_string(i) + R"( is yes."}]})" + "\n";
    }
    llmt::write_file_atomic(jsonl, lines);
    const std::string cmd = "cd '" + writer.string() + "' && node messages_parquet.mjs '" + jsonl.string() + "' '" +
                            (dataset / "data/train-00000-of-00001.parquet").string() + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    auto train = [&](const std::string& id, const fs::path& data) {
        const fs::path yaml = root_ / (id + ".yaml");
        std::ofstream(yaml)
            << "run: {name: l, seed: 4, device: cpu, threads: 1}\n"
            << "model: {init_from: " << base.string() << ", block_size: 64}\n"
            << "lora: {r: 4, alpha: 8, target_modules: [all-linear]}\n"
               "trainer: {max_steps: 4, micro_batch_size: 2, lr: 5.0e-3, min_lr: 5.0e-4, warmup_steps: 1, "
               "log_every_steps: 1, eval_every_steps: 0}\n"
            << "data: {source: chat, paths: [" << data.string() << "], tokenizer: " << base.string()
            << ", packing: true, val_fraction: 0.1, cache_dir: " << (root_ / "cache").string() << "}\n";
        const ProcResult t =
            llmtrain({"train", "--config", yaml.string(), "--set", "output.root_dir=" + (root_ / "runs").string(),
                      "--set", "output.run_id=" + id});
        EXPECT_EQ(t.exit_code, 0) << t.err;
        std::vector<double> losses;
        for (const auto& m : llmt::testing::read_metrics(root_ / "runs" / id / "metrics.jsonl"))
            if (m.contains("loss")) losses.push_back(m["loss"]);
        return losses;
    };
    const std::vector<double> from_jsonl = train("qa_jsonl", jsonl), from_parquet = train("qa_parquet", dataset);
    ASSERT_EQ(from_jsonl.size(), 4u);
    EXPECT_EQ(from_parquet, from_jsonl);
    const fs::path adapter = root_ / "qa_adapter", merged = root_ / "qa_merged";
    r = llmtrain({"export", "--checkpoint", (root_ / "runs/qa_parquet").string(), "--out", adapter.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = llmtrain({"merge", "--model", base.string(), "--adapter", adapter.string(), "--out", merged.string(),
                  "--dtype", "fp32"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto chat = [&](const fs::path& m) {
        return llmtrain(
            {"chat", "--model", m.string(), "--max-new-tokens", "8", "--seed", "9", "--set", "run.threads=1"},
            "What is item 3?\n");
    };
    const ProcResult a = chat(merged), b = chat(root_ / "runs/qa_jsonl");
    ASSERT_EQ(a.exit_code, 0) << a.err;
    ASSERT_EQ(b.exit_code, 0) << b.err;
    EXPECT_FALSE(a.out.empty());
    EXPECT_EQ(a.out, b.out);
}

TEST_F(ChatTest, UnknownTemplateIsAClearError) {
    const fs::path other = root_ / "chatml";
    fs::create_directories(other);
    fs::copy_file(kLlama3 / "tokenizer.json", other / "tokenizer.json", fs::copy_options::overwrite_existing);
    std::ofstream(other / "tokenizer_config.json")
        << R"({"bos_token": "<s>", "chat_template": "{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}"})";
    auto r = llmtrain({"chat", "--model", run_.string(), "--tokenizer", other.string()}, "hi\n");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find((other / "tokenizer_config.json").string() + ": chat_template: not a format"),
              std::string::npos)
        << r.err;
}

}  // namespace
