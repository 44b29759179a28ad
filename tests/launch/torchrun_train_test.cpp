// `llmtrain train` under torchrun's elastic agent (PyTorch's own, driven by tests/distributed/torchrun_agent.py
// because Debian's torchrun command cannot start under Python 3.11): --standalone, a static rendezvous
// whose agent store the workers join (TORCHELASTIC_USE_AGENT_STORE=True, torch's key prefixes), two
// "nodes" with the c10d rendezvous, and --max-restarts after a killed worker. Each run's losses must
// equal `llmtrain launch`'s step for step (the runs are deterministic: same data order, same reductions).
// Skips, saying why, where /usr/bin/python3 (or LLMTRAIN_TORCH_PYTHON) has no torch.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <regex>
#include <thread>

#include "core/fs.h"
#include "support/free_port.h"
#include "support/subprocess.h"
#include "tiny_run_dir.h"

namespace {

namespace fs = std::filesystem;
using llmt::testing::free_port;
using llmt::testing::llmtrain_bin;
using llmt::testing::ProcResult;
using llmt::testing::run_process;
using Clock = std::chrono::steady_clock;

// LLMTRAIN_TORCH_PYTHON / LLMTRAIN_SOURCE_DIR: another python with torch, and the checkout where the
// binary was carried (tools/gpu/torchstore_check.sh); Debian's python3 and this checkout by default.
std::string env_or(const char* name, const std::string& fallback) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? v : fallback;
}
const std::string kPython = env_or("LLMTRAIN_TORCH_PYTHON", "/usr/bin/python3");
const std::string kAgent = env_or("LLMTRAIN_SOURCE_DIR", LLMT_SOURCE_DIR) + "/tests/distributed/torchrun_agent.py";

bool have_torch() {
    return run_process({kPython, "-c", "import torch.distributed.launcher.api"}, "", 120).exit_code == 0;
}

// "step 3 loss 10.4316" per logged step, in order.
std::vector<std::string> losses(const ProcResult& r) {
    std::vector<std::string> out;
    static const std::regex re(R"(step\s+(\d+)/\d+ \| loss ([0-9.]+))");
    const std::string text = r.out + r.err;
    for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it)
        out.push_back("step " + (*it)[1].str() + " loss " + (*it)[2].str());
    return out;
}

std::string show(const ProcResult& r) { return "stdout:\n" + r.out + "\nstderr:\n" + r.err; }

class TorchrunTrain : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        torch_ = have_torch();
        if (!torch_) return;
        root_ = fs::temp_directory_path() / ("llmt_torchrun_" + std::to_string(::getpid()));
        fs::create_directories(root_);
        llmt::testing::make_tiny_run_dir(root_, 6);
        if (::testing::Test::HasFatalFailure()) return;
        reference_ = run_process({llmtrain_bin(), "launch", "--standalone", "--nproc-per-node", "2", "--", "train",
                                  "--config", (root_ / "tiny.yaml").string(), "--set", "output.run_id=launch"},
                                 "", 300);
    }
    static void TearDownTestSuite() {
        if (torch_ && !std::getenv("LLMT_KEEP")) fs::remove_all(root_);
    }
    void SetUp() override {
        if (!torch_) GTEST_SKIP() << kPython << " has no torch (python3-torch): torchrun's agent is not available";
        ASSERT_EQ(reference_.exit_code, 0) << show(reference_);
        ASSERT_EQ(losses(reference_).size(), 6u) << show(reference_);
    }

    static std::vector<std::string> agent(const std::vector<std::string>& flags) {
        std::vector<std::string> argv = {kPython, kAgent};
        argv.insert(argv.end(), flags.begin(), flags.end());
        return argv;
    }
    static std::vector<std::string> train(const std::string& run_id, const std::vector<std::string>& extra = {}) {
        std::vector<std::string> argv = {"--", llmtrain_bin(), "train", "--config", (root_ / "tiny.yaml").string(),
                                         "--set", "output.run_id=" + run_id};
        argv.insert(argv.end(), extra.begin(), extra.end());
        return argv;
    }
    static std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
        a.insert(a.end(), b.begin(), b.end());
        return a;
    }

    static inline bool torch_ = false;
    static inline fs::path root_;
    static inline ProcResult reference_;
};

TEST_F(TorchrunTrain, StandaloneMatchesLaunchStepForStep) {
    auto r = run_process(cat(agent({"--standalone", "--nproc-per-node", "2"}), train("standalone")), "", 300);
    ASSERT_EQ(r.exit_code, 0) << show(r);
    EXPECT_EQ(losses(r), losses(reference_)) << show(r);
}

TEST_F(TorchrunTrain, StaticRendezvousWorkersJoinTheAgentStore) {
    const std::string endpoint = "127.0.0.1:" + std::to_string(free_port());
    auto r = run_process(cat(agent({"--rdzv-backend", "static", "--rdzv-endpoint", endpoint, "--nproc-per-node", "2"}),
                             train("static")),
                         "", 300);
    ASSERT_EQ(r.exit_code, 0) << show(r);
    EXPECT_NE((r.out + r.err).find("the torchrun agent's store"), std::string::npos) << show(r);
    EXPECT_EQ(losses(r), losses(reference_)) << show(r);
}

TEST_F(TorchrunTrain, TwoNodesWithTheC10dRendezvousMatchLaunch) {
    const std::string endpoint = "127.0.0.1:" + std::to_string(free_port());
    auto node = [&](int) {
        return run_process(cat(agent({"--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                                      "--rdzv-endpoint", endpoint, "--rdzv-id", "two-nodes"}),
                               train("two-nodes")),
                           "", 300);
    };
    auto a = std::async(std::launch::async, node, 0);
    auto b = std::async(std::launch::async, node, 1);
    ProcResult ra = a.get(), rb = b.get();
    ASSERT_EQ(ra.exit_code, 0) << show(ra);
    ASSERT_EQ(rb.exit_code, 0) << show(rb);
    // Rank 0 (on whichever node the rendezvous put it) logs the steps.
    auto la = losses(ra), lb = losses(rb);
    EXPECT_EQ(la.empty() ? lb : la, losses(reference_)) << show(ra) << show(rb);
}

// The llmtrain workers the agent started (its children).
std::vector<pid_t> workers_of(pid_t agent_pid) {
    std::vector<pid_t> out;
    for (const auto& e : fs::directory_iterator("/proc")) {
        const std::string name = e.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::ifstream st(e.path() / "stat");
        std::string line;
        std::getline(st, line);
        auto close_paren = line.rfind(')');
        if (close_paren == std::string::npos || line.find("(llmtrain)") == std::string::npos) continue;
        std::istringstream rest(line.substr(close_paren + 2));
        char state;
        pid_t ppid = 0;
        rest >> state >> ppid;
        if (ppid == agent_pid) out.push_back(static_cast<pid_t>(std::stoi(name)));
    }
    return out;
}

TEST_F(TorchrunTrain, MaxRestartsRestartsAKilledWorkerAndItResumes) {
    const std::string endpoint = "127.0.0.1:" + std::to_string(free_port());
    auto argv = cat(agent({"--rdzv-backend", "static", "--rdzv-endpoint", endpoint, "--nproc-per-node", "2",
                           "--max-restarts", "1"}),
                    train("restart", {"--set", "trainer.max_steps=40", "--resume", "auto"}));
    auto run = std::async(std::launch::async, [&] { return run_process(argv, "", 600); });
    // Kill one worker once a checkpoint exists, so the restarted world resumes from it.
    const fs::path ckpt = root_ / "runs/restart/checkpoints/step_4";
    std::vector<pid_t> ws;
    for (auto end = Clock::now() + std::chrono::seconds(240); Clock::now() < end;) {
        std::error_code ec;
        if (fs::exists(ckpt, ec)) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_TRUE(fs::exists(ckpt)) << "no checkpoint step_4";
    // The agent is the python child of run_process: find llmtrain processes whose parent runs the agent.
    for (const auto& e : fs::directory_iterator("/proc")) {
        const std::string name = e.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::ifstream cmd(e.path() / "cmdline");
        std::string c((std::istreambuf_iterator<char>(cmd)), {});
        if (c.find(kAgent) == std::string::npos || c.find(endpoint) == std::string::npos) continue;
        auto w = workers_of(static_cast<pid_t>(std::stoi(name)));
        ws.insert(ws.end(), w.begin(), w.end());
    }
    ASSERT_EQ(ws.size(), 2u);
    ::kill(ws[1], SIGKILL);
    ProcResult r = run.get();
    ASSERT_EQ(r.exit_code, 0) << show(r);
    EXPECT_NE(r.err.find("restart 1"), std::string::npos) << show(r);
    EXPECT_NE(r.err.find("resume: "), std::string::npos) << show(r);
    auto l = losses(r);
    ASSERT_FALSE(l.empty()) << show(r);
    EXPECT_EQ(l.back().rfind("step 40 ", 0), 0u) << show(r);
}

}  // namespace
