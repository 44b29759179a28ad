// The trainer through the real binary: loss falls, exact resume, SIGTERM checkpoint, refusals, eval.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/fs.h"
#include "support/subprocess.h"
#include "support/train_fixture.h"

namespace {

namespace fs = std::filesystem;
using llmt::testing::llmtrain_bin;
using llmt::testing::ProcResult;
using llmt::testing::run_process;

class TrainTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        root_ = fs::temp_directory_path() / ("llmt_train_" + std::to_string(::getpid()));
        fs::create_directories(root_);
        auto r = llmt::testing::prepare_synthetic_shards(root_);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        std::ofstream(root_ / "tiny.yaml") << R"(run: {name: t, seed: 7, device: cpu, threads: 1, deterministic: true}
model: {n_layer: 2, n_head: 2, d_model: 32, block_size: 32, vocab_pad_multiple: 64}
trainer: {max_steps: 12, micro_batch_size: 4, grad_accum_steps: 2, lr: 3.0e-3, min_lr: 3.0e-4, warmup_steps: 2,
          log_every_steps: 1, eval_every_steps: 6, eval_steps: 4, save_every_steps: 3, keep_last: 2}
)" << "data: {train_shards: " << (root_ / "shards/train_*.bin").string()
                                       << ", val_shards: " << (root_ / "shards/val_*.bin").string() << "}\n";
    }
    static void TearDownTestSuite() { fs::remove_all(root_); }

    ProcResult train(std::vector<std::string> extra, double timeout = 600) {
        std::vector<std::string> args = {llmtrain_bin(), "train", "--config", (root_ / "tiny.yaml").string(), "--set",
                                         "output.root_dir=" + (root_ / "runs").string()};
        args.insert(args.end(), extra.begin(), extra.end());
        return run_process(args, "", timeout);
    }
    static std::vector<nlohmann::json> metrics(const fs::path& run) {
        return llmt::testing::read_metrics(run / "metrics.jsonl");
    }
    static std::vector<double> losses(const fs::path& run) {
        std::vector<double> v;
        for (const auto& m : metrics(run))
            if (m.contains("loss")) v.push_back(m["loss"]);
        return v;
    }
    static fs::path root_;
};
fs::path TrainTest::root_;

TEST_F(TrainTest, LossFallsAndRunDirectoryIsComplete) {
    auto r = train(
        {"--set", "output.run_id=falls", "--set", "trainer.max_steps=40", "--set", "trainer.eval_every_steps=20"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    fs::path run = root_ / "runs/falls";
    auto l = losses(run);
    ASSERT_EQ(l.size(), 40u);
    EXPECT_GT(l.front(), 10.0);  // ln(50257) = 10.8 at init
    EXPECT_LT(l.back(), l.front() - 3.0) << "loss did not fall";
    auto first = metrics(run).front();
    for (const char* k : {"step", "loss", "lr", "grad_norm", "ms", "tokens_per_sec"})
        EXPECT_TRUE(first.contains(k)) << k;
    auto s = nlohmann::json::parse(llmt::read_file(run / "summary.json"));
    for (const char* k : {"final_train_loss", "final_val_loss", "best_val_loss", "steps", "tokens", "wall_s",
                          "tokens_per_sec"})
        EXPECT_TRUE(s.contains(k)) << k;
    EXPECT_EQ(s["steps"], 40);
    EXPECT_FALSE(s["interrupted"].get<bool>());
    EXPECT_TRUE(fs::exists(run / "config.yaml"));
    EXPECT_TRUE(fs::exists(run / "meta.json"));
    EXPECT_TRUE(fs::exists(run / "checkpoints/step_40/model.safetensors"));
    EXPECT_TRUE(fs::exists(run / "checkpoints/step_40/config.json"));
    EXPECT_TRUE(fs::exists(run / "checkpoints/best"));
    // Validation loss fell too.
    std::vector<double> val;
    for (const auto& m : metrics(run))
        if (m.contains("val_loss")) val.push_back(m["val_loss"]);
    ASSERT_GE(val.size(), 2u);
    EXPECT_LT(val.back(), val.front());
}

TEST_F(TrainTest, ResumeIsBitIdentical) {
    ASSERT_EQ(train({"--set", "output.run_id=straight"}).exit_code, 0);
    auto r = train({"--set", "output.run_id=halves", "--stop-at-step", "6"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(losses(root_ / "runs/halves").size(), 6u);
    r = train({"--set", "output.run_id=halves", "--resume", "halves"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("at step 6"), std::string::npos) << r.err;
    EXPECT_EQ(losses(root_ / "runs/straight"), losses(root_ / "runs/halves"));
    for (const char* f : {"model.safetensors", "optimizer.safetensors"}) {
        bool same = llmt::read_file(root_ / "runs/straight/checkpoints/step_12" / f) ==
                    llmt::read_file(root_ / "runs/halves/checkpoints/step_12" / f);
        EXPECT_TRUE(same) << f << " differs between 12 straight steps and 6 + resume + 6";
    }
}

TEST_F(TrainTest, ResumeAutoStartsThenContinues) {
    auto r = train({"--set", "output.run_id=auto1", "--set", "trainer.max_steps=3", "--resume", "auto"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = train({"--set", "output.run_id=auto1", "--set", "trainer.max_steps=5", "--resume", "auto"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("at step 3"), std::string::npos) << r.err;
    // Training longer is a normal resume, and the line says what changed.
    EXPECT_NE(r.err.find("changed trainer.max_steps: 3 -> 5"), std::string::npos) << r.err;
    EXPECT_EQ(losses(root_ / "runs/auto1").size(), 5u);  // appended, no step twice
}

TEST_F(TrainTest, SigtermCheckpointsAndResumes) {
    std::vector<std::string> args = {llmtrain_bin(), "train", "--config", (root_ / "tiny.yaml").string(), "--set",
                                     "output.root_dir=" + (root_ / "runs").string(), "--set", "output.run_id=term",
                                     "--set", "trainer.max_steps=100000", "--set", "trainer.save_every_steps=0",
                                     "--set", "trainer.eval_every_steps=0"};
    pid_t pid = fork();
    if (pid == 0) {
        int log = ::open((root_ / "term.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(log, 2);
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        execv(argv[0], argv.data());
        _exit(127);
    }
    fs::path metrics_path = root_ / "runs/term/metrics.jsonl";
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < deadline) {
        std::error_code ec;
        if (fs::exists(metrics_path, ec) && fs::file_size(metrics_path, ec) > 200) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status)) << "signal " << WTERMSIG(status) << "\n" << llmt::read_file(root_ / "term.log");
    EXPECT_EQ(WEXITSTATUS(status), 143) << llmt::read_file(root_ / "term.log");
    auto s = nlohmann::json::parse(llmt::read_file(root_ / "runs/term/summary.json"));
    EXPECT_TRUE(s["interrupted"].get<bool>());
    int64_t stopped_at = s["steps"];
    EXPECT_GT(stopped_at, 0);
    EXPECT_TRUE(
        fs::exists(root_ / ("runs/term/checkpoints/step_" + std::to_string(stopped_at)) / "model.safetensors"));
    // The checkpoint loads: resume continues from it to a new end.
    auto r = train({"--set", "output.run_id=term", "--set", "trainer.max_steps=" + std::to_string(stopped_at + 2),
                    "--set", "trainer.eval_every_steps=0", "--resume", "term"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("at step " + std::to_string(stopped_at)), std::string::npos) << r.err;
}

TEST_F(TrainTest, RefusalsNameTheProblem) {
    ASSERT_EQ(train({"--set", "output.run_id=base", "--set", "trainer.max_steps=2"}).exit_code, 0);
    // The same run id again without --resume: never overwritten.
    auto r = train({"--set", "output.run_id=base"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("already exists"), std::string::npos) << r.err;
    // A different architecture: refused with the differences listed.
    r = train(
        {"--set", "output.run_id=base", "--set", "model.n_layer=3", "--set", "model.d_model=64", "--resume", "base"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("model.n_layer: 2 -> 3"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("model.d_model: 32 -> 64"), std::string::npos) << r.err;
    // A missing run names what was looked for.
    r = train({"--resume", "no-such-run"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("looked for"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("no-such-run"), std::string::npos) << r.err;
    // A truncated checkpoint file: a clear error, not a crash.
    fs::path ck = root_ / "runs/base/checkpoints/step_2/model.safetensors";
    std::string bytes = llmt::read_file(ck);
    llmt::write_file_atomic(ck, bytes.substr(0, bytes.size() / 2));
    r = train({"--set", "output.run_id=base", "--set", "trainer.max_steps=4", "--resume", "base"});
    EXPECT_FALSE(r.signaled);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("model.safetensors"), std::string::npos) << r.err;
    // Missing shards.
    r = train({"--set", "data.train_shards=/nonexistent/*.bin"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("data.train_shards"), std::string::npos) << r.err;
}

TEST_F(TrainTest, DryRunAndEval) {
    auto r = train({"--dry-run"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_GT(j["parameters"].get<int64_t>(), 0);
    EXPECT_GT(j["loss"].get<double>(), 9.0);
    EXPECT_FALSE(fs::exists(root_ / "runs" / "dry"));

    ASSERT_EQ(train({"--set", "output.run_id=ev", "--set", "trainer.max_steps=6"}).exit_code, 0);
    auto e = run_process({llmtrain_bin(), "eval", "--config", (root_ / "tiny.yaml").string(), "--checkpoint",
                          (root_ / "runs/ev/checkpoints/step_6").string(), "--json"});
    ASSERT_EQ(e.exit_code, 0) << e.err;
    auto ej = nlohmann::json::parse(e.out);
    // The trainer's final evaluation of the same weights on the same batches.
    double trainer_val = 0;
    for (const auto& m : metrics(root_ / "runs/ev"))
        if (m.contains("val_loss") && m["step"] == 6) trainer_val = m["val_loss"];
    EXPECT_DOUBLE_EQ(ej["val_loss"].get<double>(), trainer_val);
    EXPECT_EQ(ej["tokens"], 4 * 4 * 32);
    auto none = run_process({llmtrain_bin(), "eval", "--config", (root_ / "tiny.yaml").string()});
    EXPECT_EQ(none.exit_code, 2);
    EXPECT_NE(none.err.find("--checkpoint"), std::string::npos);
}

}  // namespace
