// output.sync end to end, with the llmtrain binary against a real S3-compatible server (s3rver.h): each
// checkpoint and the run's small files reach the store, the model file above the (small) multipart
// threshold in parts, the marker last; a resume from s3:// on a machine without the run directory
// reproduces the uninterrupted run's losses bit for bit; kill -9 of the trainer while an upload is in
// flight (the store stalled) leaves that step without a marker, and a resume takes the previous one;
// a 2-process run uploads from rank 0 only.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "storage/s3_client.h"
#include "storage/s3rver.h"
#include "support/subprocess.h"
#include "support/tiny_run.h"

namespace {

namespace fs = std::filesystem;
using llmt::storage::S3Client;
using llmt::storage::S3Uri;
using llmt::testing::S3rver;
using llmt::testing::TinyRun;

std::string read_text(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// The config of these tests: the tiny run, checkpoints every 2 steps, synced to s3://llmt-test/sync with
// parts of 16 KiB (the model file is ~30 KiB, so it goes up in parts).
fs::path write_config(const TinyRun& t, const std::string& extra = "") {
    const fs::path yaml = t.root() / "sync.yaml";
    std::string base = t.base_yaml();
    const std::string output = "output: {";
    base.replace(base.find(output), output.size(), output + "sync: s3://llmt-test/sync, sync_part_mb: 0.015625, ");
    std::ofstream(yaml) << base << "dist: {timeout_sec: 60}\n" << extra;
    return yaml;
}

llmt::testing::ProcResult train(const S3rver& s, const fs::path& yaml, std::vector<std::string> args) {
    std::vector<std::string> argv = {llmt::testing::llmtrain_bin(), "train", "--config", yaml.string(),
                                     "--set", "trainer.save_every_steps=2", "--set", "trainer.keep_last=10"};
    argv.insert(argv.end(), args.begin(), args.end());
    return llmt::testing::run_process(argv, "", 300, s.env());
}

// "step loss" lines of a metrics.jsonl, losses printed with every digit.
std::string losses(const fs::path& jsonl) {
    std::string out;
    for (const auto& j : llmt::testing::read_metrics(jsonl))
        if (j.contains("loss")) out += std::to_string(j["step"].get<int64_t>()) + " " + j["loss"].dump() + "\n";
    return out;
}

TEST(CheckpointSync, EveryCheckpointAndTheRunFilesReachTheStoreMarkerLast) {
    S3rver server;
    TinyRun t("sync_all");
    const auto r = train(server, write_config(t), {"--set", "trainer.max_steps=4", "--set", "output.run_id=all"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    S3Client c(server.settings());
    const S3Uri run{"llmt-test", "sync/all/"};
    std::set<std::string> keys;
    for (const auto& o : c.list_objects(run)) keys.insert(o.key.substr(run.key.size()));
    for (const char* k :
         {"config.yaml", "meta.json", "metrics.jsonl", "summary.json", "checkpoints/step_2/_SYNCED.json",
          "checkpoints/step_4/model.safetensors", "checkpoints/step_4/optimizer.safetensors",
          "checkpoints/step_4/state.json", "checkpoints/step_4/config.json",
          "checkpoints/step_4/generation_config.json", "checkpoints/step_4/_SYNCED.json"})
        EXPECT_TRUE(keys.count(k)) << k;
    const fs::path local = t.root() / "runs/all";
    EXPECT_EQ(c.get_object(run.join("checkpoints/step_4/model.safetensors")),
              read_text(local / "checkpoints/step_4/model.safetensors"));
    EXPECT_EQ(c.get_object(run.join("metrics.jsonl")), read_text(local / "metrics.jsonl"));
    EXPECT_EQ(c.get_object(run.join("summary.json")), read_text(local / "summary.json"));
    const auto marker = nlohmann::json::parse(c.get_object(run.join("checkpoints/step_4/_SYNCED.json")));
    EXPECT_EQ(marker["step"], 4);
    // The marker lists every file of the step directory: the weights, optimizer and state, and the Hugging
    // Face files written beside them (config.json, generation_config.json, the tokenizer's when the run has one).
    std::set<std::string> on_disk, listed;
    for (const auto& e : fs::directory_iterator(local / "checkpoints/step_4"))
        if (e.is_regular_file()) on_disk.insert(e.path().filename().string());
    for (const auto& f : marker["files"]) listed.insert(f["name"].get<std::string>());
    EXPECT_EQ(listed, on_disk) << marker.dump();
    EXPECT_GE(listed.size(), 5u) << marker.dump();
    for (const auto& f : marker["files"]) {
        const std::string name = f["name"];
        EXPECT_EQ(f["size"].get<uint64_t>(), fs::file_size(local / "checkpoints/step_4" / name)) << name;
        // Above the 16 KiB threshold: uploaded in parts (the JSON files are smaller).
        if (name == "model.safetensors") {
            EXPECT_GE(f["parts"].get<int>(), 2) << marker.dump();
        }
    }
    EXPECT_FALSE(fs::exists(local / ".sync")) << "staging links left behind";
}

TEST(CheckpointSync, ResumeFromS3EqualsTheUninterruptedRun) {
    S3rver server;
    TinyRun t("sync_resume");
    const fs::path yaml = write_config(t);
    auto r = train(server, yaml, {"--set", "trainer.max_steps=6", "--set", "output.run_id=whole"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = train(server, yaml, {"--set", "trainer.max_steps=6", "--set", "output.run_id=cut", "--stop-at-step", "4"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // Another machine: the run directory is gone; the run continues from the store.
    fs::remove_all(t.root() / "runs/cut");
    r = train(server, yaml,
              {"--set", "trainer.max_steps=6", "--set", "output.run_id=cut", "--resume", "s3://llmt-test/sync/cut"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("at step 4"), std::string::npos) << r.err;
    const std::string whole = losses(t.root() / "runs/whole/metrics.jsonl");
    EXPECT_NE(whole.find("\n6 "), std::string::npos) << whole;
    EXPECT_EQ(losses(t.root() / "runs/cut/metrics.jsonl"), whole);
}

TEST(CheckpointSync, ResumeAutoFetchesTheNewestSyncedStep) {
    S3rver server;
    TinyRun t("sync_auto");
    const fs::path yaml = write_config(t);
    auto r =
        train(server, yaml, {"--set", "trainer.max_steps=6", "--set", "output.run_id=auto1", "--stop-at-step", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    fs::remove_all(t.root() / "runs/auto1");
    r = train(server, yaml, {"--set", "trainer.max_steps=4", "--set", "output.run_id=auto1", "--resume", "auto"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("resume auto: fetched"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("at step 2"), std::string::npos) << r.err;
}

// kill -9 while step 4's upload is in flight: the store is frozen (SIGSTOP) after step 2 was synced, so
// the upload of step 4 hangs mid-request when the trainer dies.
TEST(CheckpointSync, KillDuringAnUploadLeavesNoMarkerAndResumeTakesThePreviousStep) {
    S3rver server;
    TinyRun t("sync_kill");
    const fs::path yaml = write_config(t);
    auto r = train(server, yaml, {"--set", "trainer.max_steps=6", "--set", "output.run_id=k", "--stop-at-step", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    server.pause();
    const std::vector<std::string> env = server.env();
    const std::vector<std::string> argv = {llmt::testing::llmtrain_bin(), "train", "--config", yaml.string(), "--set",
                                           "trainer.save_every_steps=2", "--set", "trainer.max_steps=4", "--set",
                                           "output.run_id=k", "--resume", "k"};  // the local run: no store call first
    const std::string child_log = (t.root() / "killed_trainer.log").string();
    const pid_t pid = ::fork();
    if (pid == 0) {
        const int fd = ::open(child_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
        std::vector<char*> args;
        for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        ::execv(args[0], args.data());
        _exit(127);
    }
    // Training is over (summary.json written) and the trainer is waiting on step 4's upload.
    const fs::path summary = t.root() / "runs/k/summary.json";
    for (int i = 0; i < 3000 && !(fs::exists(summary) && read_text(summary).find("\"steps\": 4") != std::string::npos);
         ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, WNOHANG), 0) << "the trainer ended although its upload could not finish";
    ::kill(pid, SIGKILL);
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFSIGNALED(status));
    server.resume();
    ASSERT_TRUE(fs::is_directory(t.root() / "runs/k/checkpoints/step_4"));

    S3Client c(server.settings());
    EXPECT_TRUE(c.head_object({"llmt-test", "sync/k/checkpoints/step_2/_SYNCED.json"}).has_value());
    EXPECT_FALSE(c.head_object({"llmt-test", "sync/k/checkpoints/step_4/_SYNCED.json"}).has_value());
    // Another machine resumes from the store: step 2, the newest complete one.
    fs::remove_all(t.root() / "runs/k");
    r = train(server, yaml,
              {"--set", "trainer.max_steps=4", "--set", "output.run_id=k", "--resume", "s3://llmt-test/sync/k"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("at step 2"), std::string::npos) << r.err;
    EXPECT_TRUE(c.head_object({"llmt-test", "sync/k/checkpoints/step_4/_SYNCED.json"}).has_value());
}

TEST(CheckpointSync, TwoProcessRunSyncsFromRankZeroOnly) {
    S3rver server;
    TinyRun t("sync_rank0");
    const auto r = llmt::testing::run_process(
        {llmt::testing::llmtrain_bin(), "launch", "--standalone", "--nproc-per-node", "2", "--", "train", "--config",
         write_config(t).string(), "--set", "trainer.max_steps=4", "--set", "trainer.save_every_steps=2", "--set",
         "output.run_id=r2"},
        "", 300, server.env());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    S3Client c(server.settings());
    EXPECT_TRUE(c.head_object({"llmt-test", "sync/r2/checkpoints/step_2/_SYNCED.json"}).has_value());
    EXPECT_TRUE(c.head_object({"llmt-test", "sync/r2/checkpoints/step_4/_SYNCED.json"}).has_value());
    const std::string log0 = read_text(t.root() / "runs/r2/logs/rank0.log");
    const std::string log1 = read_text(t.root() / "runs/r2/logs/rank1.log");
    EXPECT_NE(log0.find("sync: step_4 uploaded"), std::string::npos) << log0;
    EXPECT_FALSE(log1.empty());
    EXPECT_EQ(log1.find("sync:"), std::string::npos) << log1;
}

TEST(CheckpointSync, NoCredentialsIsRefusedBeforeTraining) {
    TinyRun t("sync_nocred");
    const auto r = llmt::testing::run_process(
        {llmt::testing::llmtrain_bin(), "train", "--config", write_config(t).string(), "--set", "output.run_id=nc"},
        "", 120,
        {"AWS_SHARED_CREDENTIALS_FILE=/nonexistent/credentials", "AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY="});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("AWS_ACCESS_KEY_ID"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(t.root() / "runs/nc/checkpoints/step_2"));
}

}  // namespace
