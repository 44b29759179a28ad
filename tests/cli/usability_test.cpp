// What a new user trips over, through the real binary: "did you mean" for unknown commands and
// options, eval/resume from a checkpoint alone, a warmup longer than the run shortened with a warning,
// every config problem in one pass, one way to name a k8s job, and the console on a terminal (a pty
// from script(1)) and off one.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "core/fs.h"
#include "support/subprocess.h"
#include "support/tiny_run.h"

namespace {

namespace fs = std::filesystem;
using llmt::testing::llmtrain_bin;
using llmt::testing::ProcResult;
using llmt::testing::run_process;

const std::string kPreset = std::string(LLMT_SOURCE_DIR) + "/configs/presets/gpt2_tiny_cpu.yaml";

ProcResult llmtrain(std::vector<std::string> args) {
    args.insert(args.begin(), llmtrain_bin());
    return run_process(args, "", 120);
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// ---- point 4: unknown subcommands and options named, with the nearest known one ----

TEST(DidYouMean, UnknownSubcommandIsNamedWithTheNearestOne) {
    auto r = llmtrain({"trian"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(has(r.err, "unknown command 'trian'")) << r.err;
    EXPECT_TRUE(has(r.err, "did you mean 'train'?")) << r.err;
    r = llmtrain({"k8s", "stauts", "x"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(has(r.err, "unknown command 'stauts' for 'llmtrain k8s'; did you mean 'status'?")) << r.err;
    r = llmtrain({"zzzzzz"});  // nothing near: the list of commands instead
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(has(r.err, "commands: ")) << r.err;
}

TEST(DidYouMean, UnknownOptionIsNamedBeforeMissingRequiredOnes) {
    auto r = llmtrain({"train", "--confg", "x.yaml"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(has(r.err, "unknown option '--confg' for 'llmtrain train'; did you mean '--config'?")) << r.err;
    EXPECT_FALSE(has(r.err, "is required")) << r.err;
    r = llmtrain({"validate", "--config", kPreset, "--jsn"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(has(r.err, "did you mean '--json'?")) << r.err;
    // An option's value is not taken for an option, nor `--opt=value` for an unknown `--opt=value`.
    r = llmtrain({"validate", "--config=" + kPreset, "--set", "trainer.lr=3e-4"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(DidYouMean, NearestNameByEditDistance) {
    // Through the binary: a transposition, a missing letter and a prefix all find their option.
    for (const auto& [typo, want] : std::vector<std::pair<std::string, std::string>>{
             {"--stop-at-setp", "--stop-at-step"}, {"--resme", "--resume"}, {"--dry", "--dry-run"}}) {
        auto r = llmtrain({"train", typo});
        EXPECT_TRUE(has(r.err, "did you mean '" + want + "'?")) << typo << ": " << r.err;
    }
}

// ---- point 5: warmup shortened, every problem in one pass ----

TEST(ConfigPass, WarmupLongerThanTheRunIsShortenedWithAWarning) {
    auto r = llmtrain({"validate", "--config", kPreset, "--set", "trainer.max_steps=12"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(has(r.err, "warning: trainer.warmup_steps (20,")) << r.err;
    EXPECT_TRUE(has(r.err, "shortened to 12")) << r.err;
    r = llmtrain({"print-config", "--config", kPreset, "--set", "trainer.max_steps=12", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["trainer"]["warmup_steps"], 12);
    r = llmtrain({"validate", "--config", kPreset, "--set", "trainer.max_steps=12", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["warnings"].size(), 1u) << r.out;
}

TEST(ConfigPass, TypeErrorsAndCrossFieldProblemsInOnePass) {
    const fs::path dir = fs::temp_directory_path() / ("llmt_ux_pass_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    // Two values of the wrong type, and three cross-field problems, all in the same pass (not after
    // the type errors are fixed). min_lr is compared with a refused lr: no problem is made up from lr's default.
    const std::string yaml = R"(schema_version: 1
run: {name: "bad name!", device: cpu}
model: {arch: gpt2, n_layer: 2, n_head: 3, d_model: 32, block_size: 16, vocab_size: 64}
trainer: {max_steps: 10, lr: fast, min_lr: 5.0, micro_batch_size: many}
dist: {backend: nccl}
data: {source: shards, train_shards: x_*.bin}
)";
    llmt::write_file_atomic(dir / "bad.yaml", yaml);
    auto r = llmtrain({"validate", "--config", (dir / "bad.yaml").string(), "--json"});
    fs::remove_all(dir);
    EXPECT_EQ(r.exit_code, 2);
    std::set<std::string> keys;
    const auto doc = nlohmann::json::parse(r.out);
    for (const auto& e : doc["errors"]) keys.insert(e["key"].get<std::string>());
    // (bf16 on the CPU is not a problem; evaluation without val_shards is.)
    for (const char* k : {"trainer.lr", "trainer.micro_batch_size", "run.name", "dist.backend", "data.val_shards",
                          "model.d_model"})
        EXPECT_TRUE(keys.count(k)) << k << " missing from " << r.out;
    EXPECT_FALSE(keys.count("trainer.min_lr")) << "min_lr compared with lr's default: " << r.out;
}

// ---- point 6: k8s names a job as NAME or --name everywhere ----

TEST(K8sNames, NameAsArgumentOrOptionEverywhere) {
    llmt::testing::TinyRun run("ux_k8s");
    llmt::write_file_atomic(run.root() / "c.yaml", run.base_yaml());
    const std::string cfg = (run.root() / "c.yaml").string();
    auto a = llmtrain({"k8s", "render", "myjob", "--config", cfg, "--nodes", "1"});
    ASSERT_EQ(a.exit_code, 0) << a.err;
    auto b = llmtrain({"k8s", "render", "--name", "myjob", "--config", cfg, "--nodes", "1"});
    ASSERT_EQ(b.exit_code, 0) << b.err;
    EXPECT_EQ(a.out, b.out);
    EXPECT_TRUE(has(a.out, "name: myjob")) << a.out;
    for (const char* cmd : {"status", "logs", "cancel", "fetch"}) {
        auto none = llmtrain({"k8s", cmd});
        EXPECT_EQ(none.exit_code, 2) << cmd;
        EXPECT_TRUE(has(none.err, std::string("llmtrain k8s ") + cmd + " NAME` (or --name NAME)")) << none.err;
        auto both = llmtrain({"k8s", cmd, "one", "--name", "two"});
        EXPECT_EQ(both.exit_code, 2) << cmd;
        EXPECT_TRUE(has(both.err, "two job names")) << both.err;
    }
}

// ---- point 8: estimates spell out their token budget; no $0 cost without rates ----

TEST(Estimate, TokenBudgetPerRowIsSpelledOutAndCostsNeedRates) {
    auto one = llmtrain({"estimate", "--config", kPreset});
    ASSERT_EQ(one.exit_code, 0) << one.err;
    EXPECT_TRUE(has(one.out, "trainer.max_steps 300 x global batch 2048 tokens")) << one.out;
    EXPECT_FALSE(has(one.out, "$0")) << one.out;
    EXPECT_FALSE(has(one.out, "cost USD")) << one.out;
    EXPECT_TRUE(has(one.out, "no cpu_hour_usd rate")) << one.out;
    // The ZeRO stage table (train/zero_scale.h): a small model fits one GPU at stage 0.
    EXPECT_TRUE(has(one.out, "needs: dist.zero_stage 0 on 1 GPU(s) of 141 GB")) << one.out;
    // Four ranks: the total grows with the global batch, and the output says so per row.
    auto four = llmtrain({"estimate", "--config", kPreset, "--nodes", "2", "--nproc-per-node", "2"});
    ASSERT_EQ(four.exit_code, 0) << four.err;
    EXPECT_TRUE(
        has(four.out, "global batch 8192 tokens (micro_batch_size 8 x grad_accum_steps 1 x block_size 256 x 4 ranks)"))
        << four.out;
    EXPECT_TRUE(has(four.out, "the 1-rank row is this run's tokens on one rank")) << four.out;
    EXPECT_TRUE(std::regex_search(four.out, std::regex(R"(\n +1 +1200 +2048 )"))) << four.out;  // ranks, steps, batch
    const fs::path rates = fs::temp_directory_path() / ("llmt_ux_rates_" + std::to_string(::getpid()) + ".json");
    llmt::write_file_atomic(rates, R"({"cpu_hour_usd": 0.05})");
    auto priced = llmtrain({"estimate", "--config", kPreset, "--rates-file", rates.string(), "--json"});
    fs::remove(rates);
    ASSERT_EQ(priced.exit_code, 0) << priced.err;
    EXPECT_GT(nlohmann::json::parse(priced.out)["worlds"][0]["cost_usd"].get<double>(), 0);
}

// ---- points 1 and 3: a trained tiny run ----

class TinyRunCli : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        run_ = new llmt::testing::TinyRun("ux_cli");
        // Six steps, a line every 3rd, eval and a checkpoint at the end.
        std::string yaml = run_->base_yaml();
        yaml = std::regex_replace(yaml, std::regex("max_steps: 3"), "max_steps: 6");
        yaml = std::regex_replace(yaml, std::regex("log_every_steps: 1"), "log_every_steps: 3");
        yaml = std::regex_replace(yaml, std::regex("eval_every_steps: 0"), "eval_every_steps: 6");
        llmt::write_file_atomic(run_->root() / "tiny.yaml", yaml);
    }
    static void TearDownTestSuite() { delete run_; }
    static std::string config() { return (run_->root() / "tiny.yaml").string(); }
    static std::string train(const std::string& run_id, const std::vector<std::string>& extra = {}) {
        std::vector<std::string> args = {"train", "--config", config(), "--set", "output.run_id=" + run_id};
        args.insert(args.end(), extra.begin(), extra.end());
        auto r = llmtrain(args);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        return r.err;
    }
    static fs::path run_dir(const std::string& id) { return run_->root() / "runs" / id; }
    static llmt::testing::TinyRun* run_;
};
llmt::testing::TinyRun* TinyRunCli::run_ = nullptr;

// Lines of rank0.log: each "<timestamp> <text>" with text.
std::vector<std::string> log_lines(const fs::path& f) {
    std::istringstream in(llmt::read_file(f));
    std::vector<std::string> out;
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
}

void expect_step_lines_in_log(const fs::path& run) {
    const auto lines = log_lines(run / "logs/rank0.log");
    int steps = 0;
    for (const auto& l : lines) {
        const auto space = l.find(' ');
        EXPECT_TRUE(space != std::string::npos && space + 1 < l.size()) << "a timestamp-only line: '" << l << "'";
        if (has(l, "step      ")) ++steps;
    }
    EXPECT_EQ(steps, 3) << "steps 1, 3 and 6 (log_every_steps 3, the first and the last)";
}

TEST_F(TinyRunCli, PlainLinesOffATerminalAndTheSameInTheLog) {
    const std::string err = train("plain");
    EXPECT_FALSE(has(err, "\033[K")) << "no terminal control off a terminal";
    EXPECT_FALSE(has(err, "\r"));
    EXPECT_TRUE(has(err, "step      3/6 | loss")) << err;
    expect_step_lines_in_log(run_dir("plain"));
}

TEST_F(TinyRunCli, ProgressBarOnATerminalKeepsTheLossHistory) {
    // script(1) runs the command on a pseudo-terminal and copies what it wrote to our stdout.
    const std::string cmd = llmtrain_bin() + " train --config " + config() + " --set output.run_id=tty";
    auto r = run_process({"script", "-qfec", cmd, "/dev/null"}, "", 120);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const std::string& tty = r.out;
    // The bar is drawn after every step (steps between log lines too) and cleared before each line.
    for (const char* bar : {"] 1/6 ", "] 2/6 ", "] 4/6 ", "] 5/6 ", "] 6/6 100%"})
        EXPECT_TRUE(has(tty, bar)) << bar << tty;
    EXPECT_TRUE(has(tty, "\r\033[K")) << tty;
    EXPECT_TRUE(has(tty, "eta ")) << tty;
    // Every step line stays on screen, each ending its own line (not overwritten by the next).
    for (const char* step : {"step      1/6", "step      3/6", "step      6/6"}) {
        const auto at = tty.find(step);
        ASSERT_NE(at, std::string::npos) << step << tty;
        const auto eol = tty.find('\n', at);
        ASSERT_NE(eol, std::string::npos);
        std::string line = tty.substr(at, eol - at);
        if (!line.empty() && line.back() == '\r') line.pop_back();  // the pty writes "\n" as "\r\n"
        EXPECT_EQ(line.find('\r'), std::string::npos) << "overwritten: " << step;
    }
    expect_step_lines_in_log(run_dir("tty"));
    EXPECT_FALSE(has(llmt::read_file(run_dir("tty") / "logs/rank0.log"), "\033[")) << "no bar in the log";
}

TEST_F(TinyRunCli, EvalTakesTheCheckpointAloneAndHintsAtData) {
    train("for-eval");
    auto r = llmtrain({"eval", "--checkpoint", run_dir("for-eval").string(), "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_GT(nlohmann::json::parse(r.out)["val_loss"].get<double>(), 0);
    r = llmtrain({"eval", "--checkpoint", run_dir("for-eval").string(), "--set",
                  "data.val_shards=" + (run_->root() / "nowhere/val_*.bin").string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(has(r.err, "matches no file")) << r.err;
    EXPECT_TRUE(has(r.err, "pass --set data.val_shards=GLOB")) << r.err;
    r = llmtrain({"eval"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(has(r.err, "give --checkpoint PATH")) << r.err;
}

TEST_F(TinyRunCli, ResumingAFinishedRunSaysItWasComplete) {
    train("done");
    const std::string err = train("done", {"--resume", "done"});
    EXPECT_TRUE(has(err, "resume: run done was already complete (step 6 of trainer.max_steps 6): nothing to train"))
        << err;
    EXPECT_FALSE(has(err, "step      6/6")) << "no step was trained again: " << err;
}

}  // namespace
