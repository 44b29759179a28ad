// ZeRO-3 (dist.zero_stage: 3) through the real binary and real processes over Gloo: 2 ranks equal one
// process with the whole batch step by step (GPT-2 and LLaMA, gradient accumulation with recompute), the
// sharded checkpoints resume in one process and a one-process checkpoint resumes on 2 ranks at stage 3,
// both as the uninterrupted run; eval, export and generate read a stage-3 checkpoint; and a rank's peak
// RSS at stage 3 is at most 0.7 of plain DDP's on a model whose weights dominate.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <sstream>
#include <thread>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <nlohmann/json.hpp>

#include "core/fs.h"
#include "core/safetensors.h"
#include "support/compare.h"
#include "support/subprocess.h"
#include "support/dist_runs.h"
#include "support/train_fixture.h"

namespace {

namespace fs = std::filesystem;
using llmt::testing::expect_same_losses;
using llmt::testing::llmtrain_bin;
using llmt::testing::run_process;
using llmt::testing::with_bin;

class Zero3Test : public llmt::testing::DistRunsTest<Zero3Test> {
public:
    static constexpr const char* kPrefix = "llmt_zero3";
    // micro_batch_size is per rank: 8 rows in one process = 2 ranks x 4 rows, the same windows.
    static constexpr const char* kYamlHead = R"(run: {name: z, seed: 11, device: cpu, threads: 1, deterministic: true}
model: {n_layer: 3, n_head: 2, d_model: 32, block_size: 32, vocab_pad_multiple: 64}
trainer: {max_steps: 20, micro_batch_size: 8, lr: 3.0e-3, min_lr: 3.0e-4, warmup_steps: 2,
          log_every_steps: 1, eval_every_steps: 10, eval_steps: 2, save_every_steps: 10, keep_last: 2}
dist: {timeout_sec: 60}
)";

protected:
    // `llmtrain launch` of 2 workers on this host.
    static std::vector<std::string> launch2(const std::vector<std::string>& train) { return launch(2, {}, train); }
    // 2 ranks at stage 3 with 4 rows each.
    static std::vector<std::string> stage3(std::vector<std::string> extra = {}) {
        extra.insert(extra.end(), {"--set", "trainer.micro_batch_size=4", "--set", "dist.zero_stage=3"});
        return extra;
    }
    // The uninterrupted one-process run of `extra`, trained once per suite under `run_id`.
    static void one_process(const std::string& run_id, const std::vector<std::string>& extra = {}) {
        if (fs::exists(root_ / "runs" / run_id / "summary.json")) return;
        auto r = run_process(with_bin(train_args(run_id, extra)), "", 600);
        ASSERT_EQ(r.exit_code, 0) << r.err;
    }
};

TEST_F(Zero3Test, TwoRanksMatchOneProcessStepByStep) {
    struct Variant {
        const char* id;
        std::vector<std::string> sets;
    };
    const Variant variants[] = {
        {"gpt2", {}},
        // Gradient accumulation adds into the chunk accumulators; recompute re-gathers the layer's weights.
        {"accum", {"--set", "trainer.grad_accum_steps=2", "--set", "trainer.recompute=all"}},
        {"llama", {"--set", "model.arch=llama", "--set", "model.n_kv_head=1", "--set", "model.tie_embeddings=false"}},
        // LoRA: the frozen base sharded and gathered per unit, the adapters whole and all-reduced.
        {"lora", {"--set", "lora.r=4", "--set", "trainer.lr=1.0e-2"}},
    };
    for (const auto& v : variants) {
        SCOPED_TRACE(v.id);
        const std::string one = std::string(v.id) + "-one", two = std::string(v.id) + "-z3";
        one_process(one, v.sets);
        auto r = run_process(launch2(train_args(two, stage3(v.sets))), "", 600);
        ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
        const std::string launched = r.out + r.err;
        EXPECT_EQ(series(one, "loss").size(), 20u);
        EXPECT_EQ(series(one, "val_loss").size(), 2u);
        expect_same_losses(series(one, "loss"), series(two, "loss"), "train loss");
        // The adapters' gradients are DDP's (their norm drifts from one process's by up to 2.4e-5 relative
        // under DDP itself, small norms summed in another order): stage 3 must give DDP's.
        std::string norm_of = one;
        if (std::string(v.id) == "lora") {
            norm_of = "lora-ddp";
            auto extra = v.sets;
            extra.insert(extra.end(), {"--set", "trainer.micro_batch_size=4"});
            r = run_process(launch2(train_args(norm_of, extra)), "", 600);
            ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
        }
        expect_same_losses(series(norm_of, "grad_norm"), series(two, "grad_norm"), "gradient norm");
        expect_same_losses(series(one, "val_loss"), series(two, "val_loss"), "val loss");
        EXPECT_NE(launched.find("ZeRO-3"), std::string::npos) << launched;
        if (std::string(v.id) == "lora") continue;  // the adapters' step is DDP's
        // The next unit's gather runs while the current one computes: every block after the first in the
        // forward, the final unit, and in backward every unit after the last block's.
        const std::string log = llmt::read_file(root_ / "runs" / two / "logs/rank1.log");
        std::smatch m;
        ASSERT_TRUE(std::regex_search(
            log, m, std::regex(R"(zero3: the first step gathered (\d+) units, (\d+) of them prefetched)")))
            << log;
        EXPECT_GE(std::stoi(m[2]), std::stoi(m[1]) / 2) << m[0];
    }
    // The checkpoint: every rank's optimizer chunk of every unit and the units' weights as HF shards.
    const fs::path step20 = root_ / "runs/gpt2-z3/checkpoints/step_20";
    EXPECT_FALSE(fs::exists(step20 / "model.safetensors"));
    EXPECT_FALSE(fs::exists(step20 / "optimizer.safetensors"));
    EXPECT_TRUE(fs::exists(step20 / "optimizer.rank1.unit2.safetensors"));
    const auto index = nlohmann::json::parse(llmt::read_file(step20 / "model.safetensors.index.json"));
    EXPECT_EQ(index["weight_map"]["transformer.h.1.attn.c_attn.weight"], "model-00003-of-00005.safetensors");
    EXPECT_TRUE(fs::exists(step20 / "model-00005-of-00005.safetensors"));
    const auto state = nlohmann::json::parse(llmt::read_file(step20 / "state.json"));
    EXPECT_EQ(state["zero_stage"], 3);
    EXPECT_EQ(state["optimizer_shards"].size(), 10u) << state.dump();  // 5 units x 2 ranks
    // A LoRA run at stage 3 (the frozen base sharded, the adapters whole) records its stage too.
    const auto lora = nlohmann::json::parse(llmt::read_file(root_ / "runs/lora-z3/checkpoints/step_20/state.json"));
    EXPECT_EQ(lora["zero_stage"], 3);
}

// Checkpoints reshard between stage 3 on 2 ranks and one process, both ways, equal to the uninterrupted
// run (the optimizer state moves between files bit for bit; only the summation order differs). eval,
// export and generate read the stage-3 checkpoint in one process.
TEST_F(Zero3Test, CheckpointsReshardBetweenStage3AndOneProcess) {
    one_process("gpt2-one");
    const auto base = series("gpt2-one", "loss");
    ASSERT_EQ(base.size(), 20u);

    // 2 ranks at stage 3 -> 1 process.
    auto r = run_process(launch2(train_args("z3to1", stage3({"--stop-at-step", "10"}))), "", 600);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    ASSERT_EQ(series("z3to1", "loss").size(), 10u);
    const fs::path ck = root_ / "runs/z3to1/checkpoints/step_10";
    const auto val10 = series("z3to1", "val_loss");
    ASSERT_EQ(val10.size(), 1u);
    r = run_process(with_bin({"eval", "--checkpoint", ck.string(), "--set", "trainer.micro_batch_size=8", "--json"}),
                    "", 300);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NEAR(nlohmann::json::parse(r.out)["val_loss"].get<double>(), val10[0], 1e-5 * val10[0]) << r.out;
    // export writes the weights the shards hold; generate from the checkpoint equals generate from the export.
    const fs::path exported = root_ / "z3-export";
    r = run_process(with_bin({"export", "--checkpoint", ck.string(), "--out", exported.string(), "--dtype", "fp32"}),
                    "", 300);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto shard = llmt::SafetensorsFile::open(ck / "model-00002-of-00005.safetensors");
    const auto whole = llmt::SafetensorsFile::open(exported / "model.safetensors");
    std::vector<float> a(3 * 32 * 32), b(a.size());
    shard.read_f32("transformer.h.0.attn.c_attn.weight", a.data(), {32, 96});
    whole.read_f32("transformer.h.0.attn.c_attn.weight", b.data(), {32, 96});
    EXPECT_EQ(a, b);
    const std::vector<std::string> gen = {"--prompt-ids", "464,3290,318",  "--max-new-tokens",
                                          "12",           "--temperature", "0"};
    auto g1 = run_process(
        with_bin({"generate", "--checkpoint", ck.string(), gen[0], gen[1], gen[2], gen[3], gen[4], gen[5]}), "", 300);
    auto g2 = run_process(
        with_bin({"generate", "--model", exported.string(), gen[0], gen[1], gen[2], gen[3], gen[4], gen[5]}), "", 300);
    ASSERT_EQ(g1.exit_code, 0) << g1.err;
    ASSERT_EQ(g2.exit_code, 0) << g2.err;
    EXPECT_FALSE(g1.out.empty());
    EXPECT_EQ(g1.out, g2.out);
    expect_resumes_as(with_bin(train_args("z3to1", {"--resume", "z3to1"})), "z3to1",
                      "optimizer state of 2 ranks at zero_stage 3 resharded for 1 rank", "gpt2-one");

    // 1 process -> 2 ranks at stage 3.
    r = run_process(with_bin(train_args("z1to3", {"--stop-at-step", "10"})), "", 600);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    expect_resumes_as(launch2(train_args("z1to3", stage3({"--resume", "z1to3"}))), "z1to3",
                      "optimizer state of 1 rank at zero_stage 0 resharded for 2 ranks at zero_stage 3", "gpt2-one");

    // A shard that is missing is named.
    fs::rename(ck / "model-00003-of-00005.safetensors", root_ / "held.safetensors");
    r = run_process(with_bin({"eval", "--checkpoint", ck.string()}), "", 300);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("model-00003-of-00005.safetensors"), std::string::npos) << r.err;
    fs::rename(root_ / "held.safetensors", ck / "model-00003-of-00005.safetensors");
}

// kill -9 of one worker of a 2-rank stage-3 run under `launch --max-restarts 1`: the launcher restarts both
// from the last complete sharded checkpoint (--resume auto) and the losses continue as the uninterrupted
// one-process run's, every step logged once.
TEST_F(Zero3Test, KilledRankRestartsFromTheShardedCheckpoint) {
    one_process("gpt2-one");
    const fs::path log = root_ / "restart.log";
    std::vector<std::string> argv = {llmtrain_bin(), "launch", "--standalone", "--nproc-per-node", "2",
                                     "--max-restarts", "1", "--"};
    for (const auto& a : train_args("restart", stage3({"--set", "trainer.save_every_steps=5", "--resume", "auto"})))
        argv.push_back(a);
    const pid_t launcher = fork();
    if (launcher == 0) {
        const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        std::vector<char*> a;
        for (auto& x : argv) a.push_back(x.data());
        a.push_back(nullptr);
        execv(a[0], a.data());
        _exit(127);
    }
    ASSERT_GT(launcher, 0);
    auto reap = [&](double seconds) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
        int status = 0;
        while (waitpid(launcher, &status, WNOHANG) == 0) {
            if (std::chrono::steady_clock::now() > deadline) {
                kill(launcher, SIGKILL);
                waitpid(launcher, &status, 0);
                return -1;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        return status;
    };
    const fs::path ck10 = root_ / "runs/restart/checkpoints/step_10/state.json";
    for (int i = 0; i < 3600 && !fs::exists(ck10); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!fs::exists(ck10)) {
        reap(0);
        FAIL() << "no step_10 checkpoint within 180 s\n" << llmt::read_file(log);
    }
    pid_t victim = 0;
    std::istringstream(llmt::read_file(fs::path("/proc") / std::to_string(launcher) / "task" /
                                       std::to_string(launcher) / "children")) >> victim;
    ASSERT_GT(victim, 0) << "no worker under the launcher";
    kill(victim, SIGKILL);
    const int status = reap(300);
    const std::string out = llmt::read_file(log);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
    EXPECT_NE(out.find("resume: "), std::string::npos) << out;
    std::vector<double> steps;  // the training rows' steps (eval rows carry a step too)
    for (const auto& m : metrics("restart"))
        if (m.contains("loss")) steps.push_back(m["step"]);
    ASSERT_EQ(steps.size(), 20u) << out;  // metrics truncated back to the checkpoint: no step twice
    for (size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(steps[i], static_cast<double>(i + 1));
    expect_same_losses(series("gpt2-one", "loss"), series("restart", "loss"), "train loss across the restart");
}

// Packed chat rows (data.packing, position ids restarting per example): the gathers do not depend on the
// rows, so stage 3 on 2 ranks gives DDP's losses and gradient norms on the same rows (LLaMA: RMSNorm, no
// biases, so the reductions are the only difference: one f32 rounding of the mean).
TEST_F(Zero3Test, PackedChatRowsMatchDdp) {
    std::string lines;
    for (int i = 0; i < 64; ++i) {
        const std::string system = i % 4 == 0 ? R"({"role": "system", "content": "Answer briefly."}, )" : "";
        lines += R"({"messages": [)" + system + R"({"role": "user", "content": "What is item )" + std::to_string(i) +
                 R"(?"}, {"role": "assistant", "content": "Item )" + std::to_string(i) + R"( is yes."}]})" + "\n";
    }
    llmt::write_file_atomic(root_ / "qa.jsonl", lines);
    std::ofstream(root_ / "pack.yaml")
        << "run: {name: p, seed: 5, device: cpu, threads: 1, deterministic: true}\n"
           "model: {arch: llama, n_layer: 2, n_head: 2, n_kv_head: 1, d_model: 32, d_ff: 64, block_size: 64, "
           "vocab_size: 128256}\n"
           "trainer: {max_steps: 6, micro_batch_size: 2, lr: 3.0e-3, min_lr: 3.0e-4, warmup_steps: 1, "
           "log_every_steps: 1, eval_every_steps: 0}\n"
           "dist: {timeout_sec: 60}\n"
        << "data: {source: chat, paths: [" << (root_ / "qa.jsonl").string()
        << "], tokenizer: " LLMT_SOURCE_DIR "/data/tokenizers/llama3, packing: true, val_fraction: 0.1, cache_dir: "
        << (root_ / "cache").string() << "}\n";
    for (const char* stage : {"0", "3"}) {
        auto r = run_process(launch2({"train", "--config", (root_ / "pack.yaml").string(), "--set",
                                      "output.root_dir=" + (root_ / "runs").string(), "--set",
                                      std::string("output.run_id=pack") + stage, "--set",
                                      std::string("dist.zero_stage=") + stage}),
                             "", 600);
        ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    }
    EXPECT_EQ(series("pack0", "loss").size(), 6u);
    expect_same_losses(series("pack0", "loss"), series("pack3", "loss"), "train loss, packed rows");
    expect_same_losses(series("pack0", "grad_norm"), series("pack3", "grad_norm"), "gradient norm, packed rows");
    EXPECT_NE(llmt::read_file(root_ / "runs/pack3/logs/rank0.log").find("examples in"), std::string::npos);
}

// What is not built is refused before anything runs, naming the key.
TEST_F(Zero3Test, UnbuiltCombinationsAreRefused) {
    for (const auto& sets : std::vector<std::vector<std::string>>{
             {"--set", "dist.zero_stage=2"},
             {"--set", "dist.zero_stage=3", "--set", "model.arch=mlp"}}) {
        auto r = run_process(with_bin(train_args("refused", sets)), "", 120);
        EXPECT_EQ(r.exit_code, 2) << r.err;
        EXPECT_NE(r.err.find("dist.zero_stage"), std::string::npos) << r.err;
    }
}

// Peak RSS per rank (VmHWM, the trainer's memory_mib_max) at stage 3 against plain DDP, 2 processes, GPT-2
// of 24 layers, d_model 512, 8 heads, T 64, micro-batch 1 (~101M parameters: the weights, gradients and
// AdamW moments, 16 bytes a parameter under DDP, dominate). Stage 3 keeps a rank's half of the masters,
// gradients and moments plus the tied embeddings gathered (weights and gradient) and one layer's buffers.
TEST_F(Zero3Test, Stage3PeakRssIsAtMostSevenTenthsOfDdp) {
    const std::vector<std::string> big = {"--set", "model.n_layer=24",         "--set", "model.d_model=512",
                                          "--set", "model.n_head=8",           "--set", "model.block_size=64",
                                          "--set", "trainer.max_steps=3",      "--set", "trainer.micro_batch_size=1",
                                          "--set", "trainer.eval_every_steps=0", "--set", "dist.bucket_mb=4"};
    auto run = [&](const char* id, int stage) {
        auto extra = big;
        extra.insert(extra.end(), {"--set", "dist.zero_stage=" + std::to_string(stage)});
        auto r = run_process(launch2(train_args(id, extra)), "", 600);
        EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    };
    run("rss-ddp", 0);
    fs::remove_all(root_ / "runs/rss-ddp/checkpoints");  // 1.2 GB of weights and moments; only metrics are read
    run("rss-z3", 3);
    const auto ddp = metrics("rss-ddp"), z3 = metrics("rss-z3");
    ASSERT_EQ(ddp.size(), 3u);
    ASSERT_EQ(z3.size(), 3u);
    const double d = ddp.back()["memory_mib_max"].get<double>(), z = z3.back()["memory_mib_max"].get<double>();
    std::printf("[zero3] peak RSS per rank: DDP %.0f MiB, stage 3 %.0f MiB (%.3f)\n", d, z, z / d);
    EXPECT_GT(d, 1000) << "DDP holds ~1.6 GB of model state per rank";
    EXPECT_LE(z, 0.7 * d) << "DDP " << ddp.back().dump() << "\nstage 3 " << z3.back().dump();
    // The memory plan (summary.json, train/run_plan.h's stage-3 arithmetic) says the same: within 10% of the
    // measured peak, which adds the binary and its libraries (~40 MiB) to the plan's arenas.
    const auto plan = nlohmann::json::parse(llmt::read_file(root_ / "runs/rss-z3/summary.json"))["memory_plan_bytes"];
    const double plan_mib = plan["total"].get<double>() / 1048576.0;
    EXPECT_NEAR(z, plan_mib, 0.1 * plan_mib) << plan.dump();
    EXPECT_LT(plan_mib, 0.7 * d) << plan.dump();
    fs::remove_all(root_ / "runs/rss-z3/checkpoints");
}

}  // namespace
