// `llmtrain launch -- train` with the real trainer (one worker): a SIGTERM to the launcher reaches the
// trainer, which checkpoints and exits 143; a worker killed mid-run is restarted with --resume auto and the
// run finishes at the same final step as an uninterrupted one.
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
#include "tiny_run_dir.h"

namespace {

namespace fs = std::filesystem;
using llmt::testing::llmtrain_bin;
using llmt::testing::run_process;
using Clock = std::chrono::steady_clock;

#define EXPECT_HAS(hay, needle) \
    EXPECT_NE((hay).find(needle), std::string::npos) << "looked for: " << (needle) << "\nin:\n" << (hay)

class LaunchTrain : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        root_ = fs::temp_directory_path() / ("llmt_launch_train_" + std::to_string(::getpid()));
        fs::create_directories(root_);
        llmt::testing::make_tiny_run_dir(root_, 12);
    }
    static void TearDownTestSuite() {
        if (!std::getenv("LLMT_KEEP")) fs::remove_all(root_);
    }

    // The launcher in the background (--standalone: a free port, so parallel tests never share one).
    pid_t start(const std::vector<std::string>& launch_flags, const std::vector<std::string>& train_args,
                const std::string& tag) {
        std::vector<std::string> argv = {llmtrain_bin(), "launch", "--standalone"};
        argv.insert(argv.end(), launch_flags.begin(), launch_flags.end());
        argv.insert(argv.end(), {"--", "train", "--config", (root_ / "tiny.yaml").string()});
        argv.insert(argv.end(), train_args.begin(), train_args.end());
        out_ = (root_ / (tag + ".out")).string();
        err_ = (root_ / (tag + ".err")).string();
        pid_t pid = fork();
        if (pid == 0) {
            (void)!freopen(out_.c_str(), "w", stdout);
            (void)!freopen(err_.c_str(), "w", stderr);
            std::vector<char*> c;
            for (auto& a : argv) c.push_back(a.data());
            c.push_back(nullptr);
            execv(c[0], c.data());
            _exit(127);
        }
        return pid;
    }

    static bool wait_for(const fs::path& p, double timeout_s) {
        auto end = Clock::now() + std::chrono::duration<double>(timeout_s);
        std::error_code ec;
        while (Clock::now() < end) {
            if (fs::exists(p, ec)) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return false;
    }

    static int wait_exit(pid_t pid, double timeout_s) {
        auto end = Clock::now() + std::chrono::duration<double>(timeout_s);
        int status = 0;
        while (Clock::now() < end) {
            if (waitpid(pid, &status, WNOHANG) == pid)
                return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        return -1;
    }

    // The launcher's one worker (its only child while training).
    static pid_t worker_of(pid_t launcher) {
        std::string path = "/proc/" + std::to_string(launcher) + "/task/" + std::to_string(launcher) + "/children";
        std::ifstream f(path);
        pid_t p = -1;
        f >> p;
        return p;
    }

    static nlohmann::json summary(const std::string& run) {
        return nlohmann::json::parse(llmt::read_file(root_ / "runs" / run / "summary.json"));
    }

    static inline fs::path root_;
    std::string out_, err_;
};

TEST_F(LaunchTrain, SigtermToTheLauncherCheckpointsTheTrainer) {
    pid_t l = start({}, {"--set", "output.run_id=term", "--set", "trainer.max_steps=100000"}, "term");
    ASSERT_TRUE(wait_for(root_ / "runs/term/checkpoints/step_2", 120)) << llmt::read_file(err_);
    kill(l, SIGTERM);
    // The trainer finishes its step, writes a checkpoint and exits 143; the launcher passes that on.
    EXPECT_EQ(wait_exit(l, 120), 143) << llmt::read_file(err_);
    auto s = summary("term");
    EXPECT_TRUE(s["interrupted"].get<bool>());
    EXPECT_TRUE(fs::exists(root_ / ("runs/term/checkpoints/step_" + std::to_string(s["steps"].get<int64_t>()))));
    EXPECT_HAS(llmt::read_file(err_), "[rank 0] ");
}

TEST_F(LaunchTrain, AKilledWorkerIsRestartedAndResumes) {
    pid_t l =
        start({"--max-restarts", "1"}, {"--set", "output.run_id=crash", "--set", "trainer.max_steps=60"}, "crash");
    ASSERT_TRUE(wait_for(root_ / "runs/crash/checkpoints/step_4", 120)) << llmt::read_file(err_);
    pid_t w = worker_of(l);
    ASSERT_GT(w, 0);
    kill(w, SIGKILL);
    EXPECT_EQ(wait_exit(l, 300), 0) << llmt::read_file(err_);
    auto err = llmt::read_file(err_);
    EXPECT_HAS(err, "worker rank 0 (pid " + std::to_string(w) + ") failed with signal 9");
    EXPECT_HAS(err, "restarting all 1 worker(s) (restart 1 of 1) with --resume auto");
    EXPECT_HAS(err, " train --config " + (root_ / "tiny.yaml").string() +
                        " --set output.run_id=crash --set trainer.max_steps=60 --resume auto\n");
    EXPECT_HAS(err, "[rank 0] resume: ");
    // Same final step count as an uninterrupted run.
    auto s = summary("crash");
    EXPECT_EQ(s["steps"].get<int64_t>(), 60);
    EXPECT_FALSE(s["interrupted"].get<bool>());
}

}  // namespace
