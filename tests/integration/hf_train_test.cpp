// `llmtrain train` with data.source: hf on a hub cache folder (tests/data/fixtures/hf, pyarrow's
// Parquet): the train split tokenized into the cache, data.val_split as the validation set, an exact
// resume; data.revision; and model.init_from given as a hub cache folder (models--ORG--NAME, refs/main or
// model.revision -> snapshot, files symlinked into blobs/).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/fs.h"
#include "support/subprocess.h"
#include "support/train_fixture.h"

namespace {

namespace fs = std::filesystem;
using llmt::testing::llmtrain_bin;
using llmt::testing::ProcResult;
using llmt::testing::run_process;

const fs::path kSource = LLMT_SOURCE_DIR;

class HfTrain : public ::testing::Test {
protected:
    void SetUp() override {
        root_ = fs::temp_directory_path() / ("llmt_hf_train_" + std::to_string(::getpid()));
        fs::remove_all(root_);
        fs::create_directories(root_);
        std::ofstream(root_ / "hf.yaml") << R"(run: {name: t, seed: 7, device: cpu, threads: 1, deterministic: true}
model: {n_layer: 2, n_head: 2, d_model: 32, block_size: 16, vocab_pad_multiple: 64}
trainer: {max_steps: 8, micro_batch_size: 2, grad_accum_steps: 1, lr: 3.0e-3, min_lr: 3.0e-4, warmup_steps: 2,
          log_every_steps: 1, eval_every_steps: 4, eval_steps: 2, save_every_steps: 2, keep_last: 2}
data:
  source: hf
  paths: [)" << (kSource / "tests/data/fixtures/hf/hub/datasets--testorg--tiny").string()
                                         << "]\n  val_split: validation\n  tokenizer: "
                                         << (kSource / "data/tokenizers/gpt2.tiktoken").string()
                                         << "\n  cache_dir: " << (root_ / "cache").string() << "\n";
    }
    void TearDown() override { fs::remove_all(root_); }

    ProcResult train(std::vector<std::string> extra) {
        std::vector<std::string> args = {llmtrain_bin(), "train", "--config", (root_ / "hf.yaml").string(), "--set",
                                         "output.root_dir=" + (root_ / "runs").string()};
        args.insert(args.end(), extra.begin(), extra.end());
        return run_process(args, "", 600);
    }
    std::vector<double> losses(const std::string& run, const char* key = "loss") {
        std::vector<double> v;
        for (const auto& m : llmt::testing::read_metrics(root_ / "runs" / run / "metrics.jsonl"))
            if (m.contains(key)) v.push_back(m[key]);
        return v;
    }
    fs::path root_;
};

TEST_F(HfTrain, HubSnapshotTrainsAndResumesExactly) {
    auto r = train({"--set", "output.run_id=straight"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("validation shards (validation)"), std::string::npos) << r.err;
    EXPECT_EQ(losses("straight").size(), 8u);
    EXPECT_EQ(losses("straight", "val_loss").size(), 2u);
    r = train({"--set", "output.run_id=halves", "--stop-at-step", "4"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("reusing"), std::string::npos) << "the second run reads the cache: " << r.err;
    r = train({"--set", "output.run_id=halves", "--resume", "halves"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(losses("straight"), losses("halves"));
    EXPECT_EQ(losses("straight", "val_loss"), losses("halves", "val_loss"));
    for (const char* f : {"model.safetensors", "optimizer.safetensors"}) {
        EXPECT_EQ(llmt::read_file(root_ / "runs/straight/checkpoints/step_8" / f),
                  llmt::read_file(root_ / "runs/halves/checkpoints/step_8" / f))
            << f;
    }
    // A split that is not there: exit 2 naming the splits found.
    r = train({"--set", "output.run_id=nosplit", "--set", "data.val_split=test"});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("no split 'test' (splits found: train, validation)"), std::string::npos) << r.err;
}

// data.revision: the snapshot by commit hash is the one refs/main names (the same files, the same
// losses); a revision that is not there names those found; with no hub cache folder it is refused.
TEST_F(HfTrain, DataRevisionPicksTheSnapshot) {
    auto r = train({"--set", "output.run_id=main", "--set", "trainer.max_steps=2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = train({"--set", "output.run_id=by_hash", "--set", "trainer.max_steps=2", "--set",
               "data.revision=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(losses("main"), losses("by_hash"));
    r = train({"--set", "output.run_id=v9", "--set", "data.revision=v9"});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(
        r.err.find(
            "has no revision 'v9' (revisions found: refs: main; snapshots: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa)"),
        std::string::npos)
        << r.err;
    r = train({"--set", "output.run_id=plain", "--set", "data.revision=v9", "--set",
               "data.paths=[" + (kSource / "tests/data/fixtures/hf/parquet/plain_none_v1.parquet").string() + "]",
               "--set", "data.val_split=\"\"", "--set", "data.val_fraction=0.1"});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("data.revision (--revision) 'v9' selects a snapshot of a hub cache folder"),
              std::string::npos)
        << r.err;
}

// A checkpoint's model.safetensors + config.json laid out as the hub cache does, then used as init_from.
TEST_F(HfTrain, InitFromHubCacheModelFolder) {
    ASSERT_EQ(train({"--set", "output.run_id=base", "--set", "trainer.max_steps=2"}).exit_code, 0);
    const fs::path step = root_ / "runs/base/checkpoints/step_2";
    const fs::path repo = root_ / "hub/models--testorg--tiny";
    const std::string sha = "89abcdef0123456789abcdef0123456789abcdef";
    fs::create_directories(repo / "blobs");
    fs::create_directories(repo / "refs");
    fs::create_directories(repo / "snapshots" / sha);
    std::ofstream(repo / "refs/main") << sha;
    int n = 0;
    for (const char* f : {"model.safetensors", "config.json"}) {
        const fs::path blob = repo / "blobs" / ("blob" + std::to_string(n++));
        fs::copy_file(step / f, blob);
        fs::create_symlink(fs::path("../..") / "blobs" / blob.filename(), repo / "snapshots" / sha / f);
    }
    auto r = train({"--set", "output.run_id=from_hub", "--set", "trainer.max_steps=2", "--set",
                    "model.init_from=" + repo.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // The same weights through the snapshot directory itself give the same losses.
    r = train({"--set", "output.run_id=from_snap", "--set", "trainer.max_steps=2", "--set",
               "model.init_from=" + (repo / "snapshots" / sha).string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(losses("from_hub"), losses("from_snap"));
    EXPECT_LT(losses("from_hub").front(), losses("base").front()) << "init_from loaded the trained weights";
    // `generate --model` takes the cache folder too (greedy, ids in and out: no tokenizer files needed).
    auto gen = [&](const fs::path& model) {
        return run_process(
            {llmtrain_bin(), "generate", "--model", model.string(), "--prompt-ids", "1,2,3", "-n", "4", "-t", "0"}, "",
            300);
    };
    const ProcResult a = gen(repo), b = gen(repo / "snapshots" / sha);
    ASSERT_EQ(a.exit_code, 0) << a.err;
    ASSERT_EQ(b.exit_code, 0) << b.err;
    EXPECT_EQ(a.out, b.out);
    EXPECT_FALSE(a.out.empty());

    // model.revision / --revision: tag v1 names a second snapshot holding other weights (the from_snap
    // run's, as blobs); training and generating from it equal doing so from those weights' directory.
    const std::string sha1 = "0000000000000000000000000000000000000001";
    const fs::path other = root_ / "runs/from_snap/checkpoints/step_2";
    fs::create_directories(repo / "snapshots" / sha1);
    std::ofstream(repo / "refs/v1") << sha1;
    for (const char* f : {"model.safetensors", "config.json"}) {
        const fs::path blob = repo / "blobs" / ("blob" + std::to_string(n++));
        fs::copy_file(other / f, blob);
        fs::create_symlink(fs::path("../..") / "blobs" / blob.filename(), repo / "snapshots" / sha1 / f);
    }
    r = train({"--set", "output.run_id=from_v1", "--set", "trainer.max_steps=2", "--set",
               "model.init_from=" + repo.string(), "--set", "model.revision=v1"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = train({"--set", "output.run_id=from_other", "--set", "trainer.max_steps=2", "--set",
               "model.init_from=" + other.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(losses("from_v1"), losses("from_other"));
    EXPECT_NE(losses("from_v1"), losses("from_hub")) << "v1 is not main's snapshot";
    const ProcResult c = run_process({llmtrain_bin(), "generate", "--model", repo.string(), "--revision", "v1",
                                      "--prompt-ids", "1,2,3", "-n", "4", "-t", "0"},
                                     "", 300);
    ASSERT_EQ(c.exit_code, 0) << c.err;
    EXPECT_EQ(c.out, gen(repo / "snapshots" / sha1).out);
    // A revision that is not there names those found; one with nothing to apply to is refused.
    r = train(
        {"--set", "output.run_id=nov", "--set", "model.init_from=" + repo.string(), "--set", "model.revision=v2"});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(
        r.err.find("has no revision 'v2' (revisions found: refs: main, v1; snapshots: " + sha1 + ", " + sha + ")"),
        std::string::npos)
        << r.err;
    const ProcResult d = run_process(
        {llmtrain_bin(), "generate", "--model", repo.string(), "--revision", "v2", "--prompt-ids", "1"}, "", 300);
    EXPECT_EQ(d.exit_code, 2) << d.err;
    EXPECT_NE(d.err.find("has no revision 'v2'"), std::string::npos) << d.err;
    r = train({"--set", "output.run_id=unused", "--set", "model.revision=v1"});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("model.revision 'v1' selects a snapshot of a hub cache folder"), std::string::npos) << r.err;
    const ProcResult e = run_process({llmtrain_bin(), "generate", "--model", (root_ / "runs/base").string(),
                                      "--revision", "v1", "--prompt-ids", "1"},
                                     "", 300);
    EXPECT_EQ(e.exit_code, 2) << e.err;
    EXPECT_NE(e.err.find("--revision 'v1' selects a snapshot of a hub cache folder"), std::string::npos) << e.err;
}

// LoRA chat fine-tuning (docs/lora.md's setup, scaled down) from a Parquet `messages` dataset: the same
// losses, step for step, as from the same conversations in chat JSONL.
TEST_F(HfTrain, ChatFromParquetMessagesTrainsLikeJsonl) {
    const fs::path tok = kSource / "data/tokenizers/llama3";
    ASSERT_TRUE(fs::exists(tok / "tokenizer.json")) << "run scripts/setup.sh (it installs " << tok << ")";
    auto config = [&](const fs::path& data) {
        const fs::path file = root_ / ("chat_" + data.filename().string() + ".yaml");
        std::ofstream(file)
            << "run: {name: c, seed: 2, device: cpu, threads: 1, deterministic: true}\n"
               "model: {arch: llama, n_layer: 2, n_head: 4, n_kv_head: 2, d_model: 64, d_ff: 128, block_size: 128,\n"
               "        vocab_size: 128256, tie_embeddings: true, rope_theta: 500000.0}\n"
               "lora: {r: 4, alpha: 8, target_modules: [all-linear]}\n"
               "trainer: {max_steps: 3, micro_batch_size: 4, grad_accum_steps: 1, lr: 1.0e-2, warmup_steps: 1,\n"
               "          log_every_steps: 1, eval_every_steps: 0, save_every_steps: 3}\n"
               "data: {source: chat, paths: ["
            << data.string() << "], tokenizer: " << tok.string()
            << ", packing: true, val_fraction: 0.1, cache_dir: " << (root_ / "cache").string() << "}\n";
        return file;
    };
    const fs::path fixtures = kSource / "tests/data/fixtures/hf";
    std::vector<std::vector<double>> runs;
    for (const fs::path& data : {fixtures / "hub/datasets--testorg--chat", fixtures / "chat/messages_zstd_v2.parquet",
                                 fixtures / "chat/expected_chat.jsonl"}) {
        const std::string id = "chat_" + data.filename().string();
        const ProcResult r =
            run_process({llmtrain_bin(), "train", "--config", config(data).string(), "--set",
                         "output.root_dir=" + (root_ / "runs").string(), "--set", "output.run_id=" + id},
                        "", 600);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        runs.push_back(losses(id));
        EXPECT_EQ(runs.back().size(), 3u);
    }
    EXPECT_EQ(runs[0], runs[2]);
    EXPECT_EQ(runs[1], runs[2]);
}

}  // namespace
