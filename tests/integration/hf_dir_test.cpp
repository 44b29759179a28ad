// LLaMA through the real binary, Hugging Face directories in and out: `llmtrain train` a tiny LLaMA,
// `llmtrain export` it (fp32: the tensors equal the checkpoint's bit for bit; bf16 sharded with an index),
// train/eval/generate from the exported directory with no model keys in the YAML (config.json supplies
// them), and bad input (a YAML key that disagrees with config.json, an --out that is not an export) exits 2
// naming the key / path without touching anything.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/fs.h"
#include "core/safetensors.h"
#include "models/hf_weights.h"
#include "support/subprocess.h"

namespace {

namespace fs = std::filesystem;
using llmt::testing::llmtrain_bin;
using llmt::testing::ProcResult;
using llmt::testing::run_process;

class HfDirTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        root_ = fs::temp_directory_path() / ("llmt_hfdir_" + std::to_string(::getpid()));
        fs::create_directories(root_);
        std::string text;
        for (int d = 0; d < 200; ++d)
            text += "Document " + std::to_string(d) + " counts " + std::to_string(d % 7) + " and " +
                    std::to_string(d % 11) + " rotary heads.\n\n";
        llmt::write_file_atomic(root_ / "corpus.txt", text);
        const ProcResult prep = llmtrain({"data", "prepare", "--input", (root_ / "corpus.txt").string(), "--format",
                                          "text", "--out", (root_ / "shards").string(), "--val-fraction", "0.1"});
        ASSERT_EQ(prep.exit_code, 0) << prep.err;
        data_ = "data: {train_shards: " + (root_ / "shards/train_*.bin").string() + ", val_shards: " +
                (root_ / "shards/val_*.bin").string() + "}\n";
        std::ofstream(root_ / "tiny.yaml")
            << "run: {name: l, seed: 3, device: cpu, threads: 1}\n"
               "model: {arch: llama, n_layer: 2, n_head: 4, n_kv_head: 2, d_model: 64, d_ff: 96, block_size: 32,\n"
               "        vocab_size: 50257, tie_embeddings: false, rope_theta: 500000.0,\n"
               "        rope_scaling: {type: llama3, factor: 8.0, original_max_position_embeddings: 16}}\n"
               "trainer: {max_steps: 6, micro_batch_size: 2, lr: 3.0e-3, warmup_steps: 1, eval_every_steps: 0, "
               "eval_steps: 2}\n"
            << data_;
        const ProcResult r = llmtrain({"train", "--config", (root_ / "tiny.yaml").string(), "--set",
                                       "output.root_dir=" + (root_ / "runs").string(), "--set", "output.run_id=t"});
        ASSERT_EQ(r.exit_code, 0) << r.err;
        run_ = root_ / "runs/t";
    }
    static void TearDownTestSuite() { fs::remove_all(root_); }

    static ProcResult llmtrain(std::vector<std::string> args) {
        args.insert(args.begin(), llmtrain_bin());
        return run_process(args, "", 600);
    }
    // A config with only model.init_from (and what is not the model's) written.
    static fs::path from_dir_config(const fs::path& dir, const std::string& extra_model = "") {
        const fs::path p = root_ / ("from_" + dir.filename().string() + ".yaml");
        std::ofstream(p) << "run: {name: f, seed: 4, device: cpu, threads: 1}\n"
                         << "model: {init_from: " << dir.string() << ", block_size: 32" << extra_model << "}\n"
                         << "trainer: {max_steps: 2, micro_batch_size: 2, lr: 1.0e-3, warmup_steps: 1, "
                            "eval_every_steps: 0, eval_steps: 2}\n"
                         << data_;
        return p;
    }
    static double val_loss(const ProcResult& r) { return nlohmann::json::parse(r.out)["val_loss"].get<double>(); }

    static fs::path root_, run_;
    static std::string data_;
};
fs::path HfDirTest::root_, HfDirTest::run_;
std::string HfDirTest::data_;

TEST_F(HfDirTest, Fp32ExportHoldsTheCheckpointsTensorsAndTransformersConfig) {
    const fs::path out = root_ / "export_fp32";
    const ProcResult r = llmtrain({"export", "--checkpoint", run_.string(), "--out", out.string(), "--dtype", "fp32"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const char* f : {"config.json", "generation_config.json", "model.safetensors"})
        EXPECT_TRUE(fs::exists(out / f)) << f;
    const auto cfg = nlohmann::json::parse(llmt::read_file(out / "config.json"));
    EXPECT_EQ(cfg["model_type"], "llama");
    EXPECT_EQ(cfg["num_key_value_heads"], 2);
    EXPECT_EQ(cfg["tie_word_embeddings"], false);
    // The checkpoint's model.safetensors is HF-layout fp32 too: the export holds exactly its tensors.
    const auto ck = llmt::SafetensorsFile::open(run_ / "checkpoints/step_6/model.safetensors");
    const auto ex = llmt::models::HfWeights::open(out);
    ASSERT_EQ(ex.names().size(), ck.size());
    for (const std::string& n : ex.names()) {
        SCOPED_TRACE(n);
        ASSERT_TRUE(ck.contains(n));
        ASSERT_EQ(ex.info(n).dtype, llmt::StDType::kF32);
        ASSERT_EQ(ex.info(n).nbytes, ck.info(n).nbytes);
        std::vector<float> a(ex.info(n).numel), b(a.size());
        ex.read_f32(n, a.data(), ex.info(n).shape);
        ck.read_f32(n, b.data(), ck.info(n).shape);
        EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
    }
    // From the exported directory, with no model keys written: the same weights, the same val loss.
    const ProcResult ev_ck =
        llmtrain({"eval", "--json", "--config", (root_ / "tiny.yaml").string(), "--checkpoint", run_.string()});
    ASSERT_EQ(ev_ck.exit_code, 0) << ev_ck.err;
    const ProcResult ev_dir = llmtrain({"eval", "--json", "--config", from_dir_config(out).string()});
    ASSERT_EQ(ev_dir.exit_code, 0) << ev_dir.err;
    EXPECT_EQ(val_loss(ev_ck), val_loss(ev_dir));
    // `generate args` from the checkpoint and from the directory: both succeed with the same output (returned).
    auto generate_both = [&](const std::vector<std::string>& args) {
        const std::vector<std::string> sources[2] = {{"--checkpoint", run_.string()}, {"--model", out.string()}};
        std::string outs[2];
        for (int k = 0; k < 2; ++k) {
            std::vector<std::string> a = {"generate"};
            a.insert(a.end(), sources[k].begin(), sources[k].end());
            a.insert(a.end(), args.begin(), args.end());
            const ProcResult g = llmtrain(a);
            EXPECT_EQ(g.exit_code, 0) << g.err;
            outs[k] = g.out;
        }
        EXPECT_EQ(outs[0], outs[1]);
        return outs[0];
    };
    // Greedy decoding from the checkpoint and from the directory agree token for token.
    const std::string greedy = generate_both({"--prompt-ids", "464,3290,318", "--temperature", "0", "-n", "8"});
    EXPECT_EQ(greedy.rfind("464 3290 318 ", 0), 0u) << greedy;
    // The run's tokenizer (GPT-2's, data.tokenizer's default) is in the export as vocab.json + merges.txt,
    // and its ids in both JSON files; text through the export's own tokenizer is the run's text.
    for (const char* f : {"vocab.json", "merges.txt", "tokenizer_config.json"}) EXPECT_TRUE(fs::exists(out / f)) << f;
    EXPECT_EQ(cfg["eos_token_id"], 50256);
    EXPECT_EQ(cfg["bos_token_id"], 50256);
    EXPECT_EQ(cfg["pad_token_id"], 50256);
    const auto gen = nlohmann::json::parse(llmt::read_file(out / "generation_config.json"));
    EXPECT_EQ(gen["eos_token_id"], 50256);
    EXPECT_EQ(gen["pad_token_id"], 50256);
    generate_both({"--prompt", "Document 3 counts", "--temperature", "0", "-n", "8"});
    // And training continues from it.
    const ProcResult tr =
        llmtrain({"train", "--config", from_dir_config(out).string(), "--set",
                  "output.root_dir=" + (root_ / "runs").string(), "--set", "output.run_id=from_dir"});
    ASSERT_EQ(tr.exit_code, 0) << tr.err;
    EXPECT_NE(tr.err.find("model: llama, 2 layers"), std::string::npos) << tr.err;
    EXPECT_NE(tr.err.find("trainer: 2 steps (trainer.max_steps)"), std::string::npos) << tr.err;
}

TEST_F(HfDirTest, Bf16ExportShardsWithAnIndexAndLoads) {
    const fs::path out = root_ / "export_bf16";
    // 1 MB shards: the 2 x 6.4 MB embedding tables and the layers spread over several files.
    const ProcResult r =
        llmtrain({"export", "--checkpoint", run_.string(), "--out", out.string(), "--max-shard-size", "1MB"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ASSERT_TRUE(fs::exists(out / "model.safetensors.index.json"));
    EXPECT_FALSE(fs::exists(out / "model.safetensors"));
    const auto ex = llmt::models::HfWeights::open(out);
    EXPECT_GT(ex.shard_count(), 2u);
    EXPECT_EQ(ex.info("model.embed_tokens.weight").dtype, llmt::StDType::kBF16);
    EXPECT_EQ(nlohmann::json::parse(llmt::read_file(out / "config.json"))["dtype"], "bfloat16");
    // bf16 weights (8 significant bits) against the fp32 ones: the loss moves by far less than 1%.
    const ProcResult ev_ck =
        llmtrain({"eval", "--json", "--config", (root_ / "tiny.yaml").string(), "--checkpoint", run_.string()});
    const ProcResult ev_dir = llmtrain({"eval", "--json", "--config", from_dir_config(out).string()});
    ASSERT_EQ(ev_dir.exit_code, 0) << ev_dir.err;
    EXPECT_NEAR(val_loss(ev_dir), val_loss(ev_ck), 0.01 * val_loss(ev_ck));
}

TEST_F(HfDirTest, BadInputExitsTwoNamingWhatIsWrongAndTouchesNothing) {
    const fs::path out = root_ / "export_check";
    ASSERT_EQ(llmtrain({"export", "--checkpoint", run_.string(), "--out", out.string()}).exit_code, 0);
    // A written model key that disagrees with config.json names both sides.
    const ProcResult mismatch =
        llmtrain({"eval", "--json", "--config", from_dir_config(out, ", n_layer: 3").string()});
    EXPECT_EQ(mismatch.exit_code, 2) << mismatch.err;
    EXPECT_NE(mismatch.err.find("model.n_layer"), std::string::npos) << mismatch.err;
    EXPECT_NE(mismatch.err.find("num_hidden_layers"), std::string::npos) << mismatch.err;
    // An --out that holds something else is refused, and left as it was.
    const fs::path other = root_ / "not_an_export";
    fs::create_directories(other);
    llmt::write_file_atomic(other / "notes.txt", "mine\n");
    const ProcResult refused = llmtrain({"export", "--checkpoint", run_.string(), "--out", other.string()});
    EXPECT_EQ(refused.exit_code, 2) << refused.err;
    EXPECT_NE(refused.err.find("notes.txt"), std::string::npos) << refused.err;
    EXPECT_EQ(llmt::read_file(other / "notes.txt"), "mine\n");
    EXPECT_FALSE(fs::exists(other / "config.json"));
    // A missing tensor in the directory is named.
    const fs::path broken = root_ / "broken";
    fs::create_directories(broken);
    fs::copy_file(out / "config.json", broken / "config.json");
    const auto src = llmt::models::HfWeights::open(out);
    std::vector<std::vector<float>> keep;
    std::vector<llmt::TensorRef> refs;
    for (const std::string& n : src.names()) {
        if (n == "model.layers.1.mlp.up_proj.weight") continue;
        auto& v = keep.emplace_back(src.info(n).numel);
        src.read_f32(n, v.data(), src.info(n).shape);
        refs.push_back({n, llmt::StDType::kF32, src.info(n).shape, v.data()});
    }
    llmt::write_safetensors(broken / "model.safetensors", refs);
    const ProcResult missing = llmtrain({"eval", "--json", "--config", from_dir_config(broken).string()});
    EXPECT_EQ(missing.exit_code, 2) << missing.err;
    EXPECT_NE(missing.err.find("missing tensor `model.layers.1.mlp.up_proj.weight`"), std::string::npos)
        << missing.err;
}

}  // namespace
