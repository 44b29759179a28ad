// s3:// inputs of `train` against a real S3-compatible server (s3rver.h): data.train_shards and
// data.val_shards as s3:// globs and model.init_from as an s3:// model directory give the same losses,
// bit for bit, as the same files read locally; a second run reuses the cache (no object is downloaded
// again); a glob that matches nothing is refused naming the key; `data prepare --input s3://prefix`
// writes the shards the same files give locally.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "storage/s3_client.h"
#include "storage/s3rver.h"
#include "storage/transfer.h"
#include "support/subprocess.h"
#include "support/tiny_run.h"

namespace {

namespace fs = std::filesystem;
using llmt::storage::S3Client;
using llmt::testing::S3rver;
using llmt::testing::TinyRun;

llmt::testing::ProcResult train(const S3rver& s, const TinyRun& t, std::vector<std::string> sets) {
    const fs::path yaml = t.root() / "inputs.yaml";
    std::ofstream(yaml) << t.base_yaml();
    std::vector<std::string> argv = {llmt::testing::llmtrain_bin(), "train", "--config", yaml.string(), "--set",
                                     "trainer.max_steps=3", "--set", "trainer.eval_every_steps=3"};
    for (const auto& x : sets) {
        argv.push_back("--set");
        argv.push_back(x);
    }
    return llmt::testing::run_process(argv, "", 300, s.env());
}

std::string trace(const fs::path& jsonl) {
    std::string out;
    for (const auto& j : llmt::testing::read_metrics(jsonl)) {
        if (j.contains("loss")) out += "loss " + j["loss"].dump() + "\n";
        if (j.contains("val_loss")) out += "val " + j["val_loss"].dump() + "\n";
    }
    return out;
}

TEST(RemoteInputs, ShardsAndInitFromFromTheStoreEqualTheLocalFiles) {
    S3rver server;
    TinyRun t("remote_inputs");
    S3Client c(server.settings());
    // A model directory to start from: a checkpoint's step directory (model.safetensors + config.json).
    auto r = train(server, t, {"output.run_id=base"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const fs::path step = t.root() / "runs/base/checkpoints/step_3";
    for (const char* f : {"model.safetensors", "config.json"})
        llmt::storage::upload_file(c, step / f, {"llmt-test", std::string("models/m/") + f});
    for (const char* f : {"train_000000.bin", "val_000000.bin"})
        llmt::storage::upload_file(c, t.root() / "shards" / f, {"llmt-test", std::string("data/") + f});

    r = train(server, t, {"output.run_id=local", "model.init_from=" + step.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = train(server, t,
              {"output.run_id=remote", "model.init_from=s3://llmt-test/models/m",
               "data.train_shards=s3://llmt-test/data/train_*.bin", "data.val_shards=s3://llmt-test/data/val_*.bin"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string local = trace(t.root() / "runs/local/metrics.jsonl");
    EXPECT_NE(local.find("val "), std::string::npos) << local;
    EXPECT_EQ(trace(t.root() / "runs/remote/metrics.jsonl"), local);
    const fs::path cached = t.root() / "runs/.cache/s3/llmt-test/data/train_000000.bin";
    ASSERT_TRUE(fs::exists(cached));
    EXPECT_TRUE(fs::exists(t.root() / "runs/.cache/s3/llmt-test/models/m/model.safetensors"));

    // Again: the cached files are used as they are (not rewritten).
    const auto mtime = fs::last_write_time(cached);
    r = train(server, t, {"output.run_id=remote2", "data.train_shards=s3://llmt-test/data/train_*.bin",
                          "data.val_shards=s3://llmt-test/data/val_*.bin"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(fs::last_write_time(cached), mtime);
}

TEST(RemoteInputs, AGlobThatMatchesNothingIsRefusedNamingTheKey) {
    S3rver server;
    TinyRun t("remote_inputs_none");
    const auto r = train(server, t, {"output.run_id=none", "data.train_shards=s3://llmt-test/nothing/*.bin"});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("data.train_shards"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("s3://llmt-test/nothing/*.bin"), std::string::npos) << r.err;
}

// data prepare --input s3://...: a prefix of corpus files gives the same shards as the same files read locally.
TEST(RemoteInputs, DataPrepareFromAPrefixEqualsTheLocalCorpus) {
    S3rver server;
    TinyRun t("remote_prepare");
    S3Client c(server.settings());
    const fs::path corpus = t.root() / "corpus";
    fs::create_directories(corpus);
    std::ofstream(corpus / "a.txt") << "The first document.\n\nThe second one, a little longer than the first.\n";
    std::ofstream(corpus / "b.txt") << "Another file with a document.\n";
    for (const char* f : {"a.txt", "b.txt"})
        llmt::storage::upload_file(c, corpus / f, {"llmt-test", std::string("corpus/") + f});
    auto prepare = [&](const std::string& input, const fs::path& out) {
        return llmt::testing::run_process({llmt::testing::llmtrain_bin(), "data", "prepare", "--input", input, "--out",
                                           out.string(), "--val-fraction", "0", "--quiet", "--input-cache",
                                           (t.root() / "s3cache").string()},
                                          "", 120, server.env());
    };
    auto r = prepare(corpus.string(), t.root() / "local");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = prepare("s3://llmt-test/corpus", t.root() / "remote");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(fs::exists(t.root() / "s3cache/llmt-test/corpus/a.txt"));
    size_t shards = 0;
    for (const auto& e : fs::directory_iterator(t.root() / "local")) {
        if (e.path().extension() != ".bin") continue;
        ++shards;
        std::ifstream l(e.path(), std::ios::binary), m(t.root() / "remote" / e.path().filename(), std::ios::binary);
        EXPECT_EQ(std::string(std::istreambuf_iterator<char>(l), {}),
                  std::string(std::istreambuf_iterator<char>(m), {}))
            << e.path().filename();
    }
    EXPECT_GE(shards, 1u);
}

}  // namespace
