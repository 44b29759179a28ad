// Data-parallel training through the real binary and real processes (issue 5): 2 ranks over Gloo on
// the same global batch match 1 process (DDP and ZeRO-1), a killed peer is an error on the survivor
// within the timeout, `launch --max-restarts 1` resumes from the last checkpoint, and a late worker
// still joins.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "core/fs.h"
#include "core/safetensors.h"
#include "support/netns_hosts.h"
#include "support/free_port.h"
#include "support/subprocess.h"
#include "support/train_fixture.h"

namespace {

namespace fs = std::filesystem;
using llmt::testing::free_port;
using llmt::testing::llmtrain_bin;
using llmt::testing::run_process;
using Clock = std::chrono::steady_clock;

// llmtrain followed by args.
std::vector<std::string> with_bin(std::vector<std::string> args) {
    args.insert(args.begin(), llmtrain_bin());
    return args;
}

// Starts argv in the background with extra env and stderr+stdout to `log`.
pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env, const fs::path& log) {
    pid_t pid = fork();
    if (pid == 0) {
        int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        for (const auto& e : env) putenv(const_cast<char*>(e.c_str()));
        std::vector<char*> a;
        for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
        a.push_back(nullptr);
        execv(a[0], a.data());
        _exit(127);
    }
    return pid;
}

// Kills (SIGKILL) and reaps the processes still registered when the test leaves its scope, so a failed
// assertion never leaves trainers running.
struct ProcessGuard {
    std::vector<pid_t> pids;
    pid_t add(pid_t p) {
        pids.push_back(p);
        return p;
    }
    ~ProcessGuard() {
        for (pid_t p : pids) {
            if (waitpid(p, nullptr, WNOHANG) == 0) {
                kill(p, SIGKILL);
                waitpid(p, nullptr, 0);
            }
        }
    }
};

// waitpid with a deadline; returns the status, or kills the process and fails the test on timeout.
int wait_for(pid_t pid, double seconds, const fs::path& log) {
    auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (Clock::now() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            ADD_FAILURE() << "process " << pid << " did not exit within " << seconds << " s\n" << llmt::read_file(log);
            return -1;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return status;
}

bool wait_until(const std::function<bool()>& cond, double seconds) {
    auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < deadline) {
        if (cond()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
}

class DdpTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        root_ = fs::temp_directory_path() / ("llmt_ddp_" + std::to_string(::getpid()));
        fs::create_directories(root_);
        auto r = llmt::testing::prepare_synthetic_shards(root_);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        // micro_batch_size is per rank: 8 rows in one process = 2 ranks x 4 rows, the same windows.
        std::ofstream(root_ / "tiny.yaml") << R"(run: {name: d, seed: 11, device: cpu, threads: 1, deterministic: true}
model: {n_layer: 2, n_head: 2, d_model: 32, block_size: 32, vocab_pad_multiple: 64}
trainer: {max_steps: 20, micro_batch_size: 8, lr: 3.0e-3, min_lr: 3.0e-4, warmup_steps: 2,
          log_every_steps: 1, eval_every_steps: 10, eval_steps: 2, save_every_steps: 10, keep_last: 2}
dist: {timeout_sec: 30, bucket_mb: 0.01}
)" << "data: {train_shards: " << (root_ / "shards/train_*.bin").string()
                                       << ", val_shards: " << (root_ / "shards/val_*.bin").string() << "}\n";
    }
    static void TearDownTestSuite() { fs::remove_all(root_); }

    static std::vector<std::string> train_args(const std::string& run_id, std::vector<std::string> extra = {}) {
        std::vector<std::string> a = {"train", "--config", (root_ / "tiny.yaml").string(), "--set",
                                      "output.root_dir=" + (root_ / "runs").string(), "--set", "output.run_id=" + run_id};
        a.insert(a.end(), extra.begin(), extra.end());
        return a;
    }
    static std::vector<std::string> launch(int nproc, std::vector<std::string> launch_flags,
                                           const std::vector<std::string>& train) {
        std::vector<std::string> a = {llmtrain_bin(), "launch", "--standalone", "--nproc-per-node", std::to_string(nproc)};
        a.insert(a.end(), launch_flags.begin(), launch_flags.end());
        a.push_back("--");
        a.insert(a.end(), train.begin(), train.end());
        return a;
    }
    static std::vector<nlohmann::json> metrics(const std::string& run_id) {
        return llmt::testing::read_metrics(root_ / "runs" / run_id / "metrics.jsonl");
    }
    static std::vector<double> series(const std::string& run_id, const char* key) {
        std::vector<double> v;
        for (const auto& m : metrics(run_id))
            if (m.contains(key)) v.push_back(m[key]);
        return v;
    }
    static fs::path root_;
};
fs::path DdpTest::root_;

// fp32: the two ranks sum their halves of each gradient in another order than one process does and
// the average adds one rounding, so weights differ by a few ulps per step; 1e-5 relative on the loss
// over 20 steps is the issue's bound and ~100x what that drift gives.
void expect_same_losses(const std::vector<double>& a, const std::vector<double>& b, const char* what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5 * std::abs(a[i])) << what << " at entry " << i;
}

TEST_F(DdpTest, TwoRanksMatchOneProcessWithDdpAndZero1) {
    auto one = run_process(with_bin(train_args("one")), "", 600);
    ASSERT_EQ(one.exit_code, 0) << one.err;
    const auto base = series("one", "loss");
    ASSERT_EQ(base.size(), 20u);

    struct Variant {
        const char* run_id;
        std::vector<std::string> sets;
    };
    const Variant variants[] = {
        {"ddp", {}},
        {"ddp-no-overlap", {"--set", "dist.overlap=false"}},
        {"zero1", {"--set", "dist.zero_stage=1"}},
    };
    for (const auto& v : variants) {
        SCOPED_TRACE(v.run_id);
        auto extra = v.sets;
        extra.insert(extra.end(), {"--set", "trainer.micro_batch_size=4"});
        auto r = run_process(launch(2, {}, train_args(v.run_id, extra)), "", 600);
        ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
        expect_same_losses(base, series(v.run_id, "loss"), "train loss");
        expect_same_losses(series("one", "val_loss"), series(v.run_id, "val_loss"), "val loss");
        EXPECT_TRUE(fs::exists(root_ / "runs" / v.run_id / "logs/rank0.log"));
        EXPECT_TRUE(fs::exists(root_ / "runs" / v.run_id / "logs/rank1.log"));
        auto s = nlohmann::json::parse(llmt::read_file(root_ / "runs" / v.run_id / "summary.json"));
        EXPECT_EQ(s["world_size"], 2);
        EXPECT_EQ(s["steps"], 20);
    }
    // ZeRO-1 checkpoints hold one optimizer shard per rank and resume only with the same world size.
    EXPECT_TRUE(fs::exists(root_ / "runs/zero1/checkpoints/step_20/optimizer.rank0.safetensors"));
    EXPECT_TRUE(fs::exists(root_ / "runs/zero1/checkpoints/step_20/optimizer.rank1.safetensors"));
    EXPECT_FALSE(fs::exists(root_ / "runs/zero1/checkpoints/step_20/optimizer.safetensors"));
    auto r = run_process(with_bin(train_args("zero1", {"--set", "trainer.max_steps=22", "--resume", "zero1"})), "", 300);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("same world size"), std::string::npos) << r.err;
    r = run_process(launch(2, {}, train_args("zero1", {"--set", "trainer.micro_batch_size=4", "--set",
                                                       "dist.zero_stage=1", "--set", "trainer.max_steps=22",
                                                       "--resume", "zero1"})),
                    "", 300);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(series("zero1", "loss").size(), 22u);
}

// SGD's momentum buffer is sharded like AdamW's moments: 2 ranks with ZeRO-1 match one process, and the
// shards resume (trainer.optimizer sgd with Nesterov momentum and weight decay).
TEST_F(DdpTest, SgdTwoRanksWithZero1MatchOneProcessAndResume) {
    const std::vector<std::string> sgd = {"--set", "trainer.optimizer=sgd", "--set", "trainer.nesterov=true",
                                          "--set", "trainer.lr=0.3", "--set", "trainer.min_lr=0.03"};
    auto one = run_process(with_bin(train_args("sgd-one", sgd)), "", 600);
    ASSERT_EQ(one.exit_code, 0) << one.err;
    auto extra = sgd;
    extra.insert(extra.end(), {"--set", "trainer.micro_batch_size=4", "--set", "dist.zero_stage=1"});
    auto r = run_process(launch(2, {}, train_args("sgd-zero1", extra)), "", 600);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    expect_same_losses(series("sgd-one", "loss"), series("sgd-zero1", "loss"), "train loss");
    expect_same_losses(series("sgd-one", "val_loss"), series("sgd-zero1", "val_loss"), "val loss");
    const auto shard = llmt::SafetensorsFile::open(root_ / "runs/sgd-zero1/checkpoints/step_20/optimizer.rank1.safetensors");
    EXPECT_EQ(shard.metadata().at("format"), "llmtrain.sgd.v1");
    extra.insert(extra.end(), {"--set", "trainer.max_steps=22", "--resume", "sgd-zero1"});
    r = run_process(launch(2, {}, train_args("sgd-zero1", extra)), "", 300);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(series("sgd-zero1", "loss").size(), 22u);
}

// Two "hosts" (network namespaces on a bridge, own IPs and host names; tests/support/netns_hosts.sh), one
// launcher each, rank 0 found by host name: the same losses as one process.
// LLaMA goes through the same model interface hooks (the grads-ready offsets for the Reducer, the flat
// arena for ZeRO-1): 2 ranks with ZeRO-1 and overlapped DDP buckets match one process with the whole batch.
TEST_F(DdpTest, LlamaTwoRanksWithZero1MatchOneProcess) {
    const std::vector<std::string> llama = {"--set", "model.arch=llama", "--set", "model.n_kv_head=1"};
    auto one = run_process(with_bin(train_args("llama-one", llama)), "", 600);
    ASSERT_EQ(one.exit_code, 0) << one.err;
    auto extra = llama;
    extra.insert(extra.end(), {"--set", "trainer.micro_batch_size=4", "--set", "dist.zero_stage=1"});
    auto r = run_process(launch(2, {}, train_args("llama-zero1", extra)), "", 600);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    expect_same_losses(series("llama-one", "loss"), series("llama-zero1", "loss"), "train loss");
    expect_same_losses(series("llama-one", "val_loss"), series("llama-zero1", "val_loss"), "val loss");
}

TEST_F(DdpTest, TwoHostsInNetworkNamespacesMatchOneProcess) {
    if (!fs::exists(root_ / "runs/one/metrics.jsonl")) {
        auto one = run_process(with_bin(train_args("one")), "", 600);
        ASSERT_EQ(one.exit_code, 0) << one.err;
    }
    std::string cmd = llmtrain_bin() + " launch --nnodes 2 --node-rank $NETNS_HOST_INDEX --nproc-per-node 1" +
                      " --master-addr host-0 --master-port " + std::to_string(free_port()) + " --";
    for (const auto& a : train_args("hosts", {"--set", "trainer.micro_batch_size=4"})) cmd += " '" + a + "'";
    auto r = llmt::testing::run_on_hosts(cmd, 2, 300);
    if (r.skipped) GTEST_SKIP() << r.skip_reason;
    ASSERT_EQ(r.proc.exit_code, 0) << r.proc.out << r.proc.err;
    expect_same_losses(series("one", "loss"), series("hosts", "loss"), "train loss");
    expect_same_losses(series("one", "val_loss"), series("hosts", "val_loss"), "val loss");
    EXPECT_NE(r.proc.out.find("[host-1]"), std::string::npos) << r.proc.out;
}

TEST_F(DdpTest, KilledPeerIsAnErrorOnTheSurvivorNotAHang) {
    const int port = free_port();
    auto args = with_bin(train_args("dead", {"--set", "trainer.max_steps=100000", "--set", "trainer.eval_every_steps=0",
                                             "--set", "trainer.save_every_steps=0", "--set",
                                             "trainer.micro_batch_size=4", "--set", "dist.timeout_sec=15"}));
    auto env = [&](int rank) {
        return std::vector<std::string>{"RANK=" + std::to_string(rank), "LOCAL_RANK=" + std::to_string(rank),
                                        "WORLD_SIZE=2", "LOCAL_WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1",
                                        "MASTER_PORT=" + std::to_string(port)};
    };
    ProcessGuard guard;
    pid_t r0 = guard.add(spawn(args, env(0), root_ / "dead0.log"));
    pid_t r1 = guard.add(spawn(args, env(1), root_ / "dead1.log"));
    ASSERT_TRUE(wait_until([&] { return fs::exists(root_ / "runs/dead/metrics.jsonl") && series("dead", "loss").size() >= 3; }, 120)) << llmt::read_file(root_ / "dead0.log");
    kill(r1, SIGKILL);
    waitpid(r1, nullptr, 0);
    auto t0 = Clock::now();
    int status = wait_for(r0, 15 + 15, root_ / "dead0.log");
    double took = std::chrono::duration<double>(Clock::now() - t0).count();
    const std::string log = llmt::read_file(root_ / "dead0.log");
    ASSERT_TRUE(WIFEXITED(status)) << log;
    EXPECT_EQ(WEXITSTATUS(status), 1) << log;
    EXPECT_NE(log.find("rank 1"), std::string::npos) << "the error should name the lost peer:\n" << log;
    EXPECT_LT(took, 30.0);
}

TEST_F(DdpTest, LaunchRestartsFromTheLastCheckpoint) {
    const fs::path log = root_ / "restart.log";
    ProcessGuard guard;
    pid_t launcher = guard.add(spawn(launch(2, {"--max-restarts", "1"},
                                  train_args("restart", {"--set", "trainer.max_steps=40", "--set",
                                                         "trainer.save_every_steps=5", "--set",
                                                         "trainer.micro_batch_size=4", "--set",
                                                         "trainer.eval_every_steps=0", "--resume", "auto"})),
                                     {}, log));
    ASSERT_TRUE(wait_until([&] { return fs::exists(root_ / "runs/restart/checkpoints/step_10/state.json"); }, 180))
        << llmt::read_file(log);
    // kill -9 one worker: a child of the launcher.
    std::string children = llmt::read_file(fs::path("/proc") / std::to_string(launcher) / "task" /
                                            std::to_string(launcher) / "children");
    std::istringstream in(children);
    pid_t victim = 0;
    in >> victim;
    ASSERT_GT(victim, 0) << "no worker found under the launcher";
    kill(victim, SIGKILL);
    int status = wait_for(launcher, 300, log);
    const std::string out = llmt::read_file(log);
    ASSERT_TRUE(WIFEXITED(status)) << out;
    EXPECT_EQ(WEXITSTATUS(status), 0) << out;
    auto s = nlohmann::json::parse(llmt::read_file(root_ / "runs/restart/summary.json"));
    EXPECT_EQ(s["steps"], 40);
    EXPECT_NE(out.find("resume: "), std::string::npos) << out;
    // No step is logged twice: metrics were truncated back to the checkpoint on resume.
    auto steps = series("restart", "step");
    ASSERT_EQ(steps.size(), 40u) << out;
    for (size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(steps[i], static_cast<double>(i + 1));
}

TEST_F(DdpTest, AWorkerThatStartsTwentySecondsLateStillJoins) {
    const int port = free_port();
    auto args = with_bin(train_args("late", {"--set", "trainer.max_steps=4", "--set", "trainer.micro_batch_size=4"}));
    auto env = [&](int rank) {
        return std::vector<std::string>{"RANK=" + std::to_string(rank), "LOCAL_RANK=" + std::to_string(rank),
                                        "WORLD_SIZE=2", "LOCAL_WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1",
                                        "MASTER_PORT=" + std::to_string(port)};
    };
    ProcessGuard guard;
    pid_t r1 = guard.add(spawn(args, env(1), root_ / "late1.log"));  // the client first: it must retry the connection
    std::this_thread::sleep_for(std::chrono::seconds(20));
    pid_t r0 = guard.add(spawn(args, env(0), root_ / "late0.log"));
    int s0 = wait_for(r0, 120, root_ / "late0.log"), s1 = wait_for(r1, 120, root_ / "late1.log");
    EXPECT_TRUE(WIFEXITED(s0) && WEXITSTATUS(s0) == 0) << llmt::read_file(root_ / "late0.log");
    EXPECT_TRUE(WIFEXITED(s1) && WEXITSTATUS(s1) == 0) << llmt::read_file(root_ / "late1.log");
    EXPECT_EQ(series("late", "loss").size(), 4u);
}

}  // namespace
