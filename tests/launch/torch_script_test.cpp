// `llmtrain launch -- /usr/bin/python3 script.py`: a real 2-process PyTorch DDP script (Debian's torch 1.13,
// gloo, init_process_group("env://")) under the launcher, as a drop-in for torchrun: it trains with
// torchrun's worker environment, a killed worker is restarted with --max-restarts, and a raised exception
// reaches the launcher's output through TORCHELASTIC_ERROR_FILE. Torch starts slowly here (2-4 s a
// process), so each case runs as few processes as it can.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/subprocess.h"

namespace {

namespace fs = std::filesystem;
using llmt::testing::llmtrain_bin;
using llmt::testing::ProcResult;
using llmt::testing::run_process;

#define EXPECT_HAS(hay, needle) \
    EXPECT_NE((hay).find(needle), std::string::npos) << "looked for: " << (needle) << "\nin:\n" << (hay)
#define EXPECT_LACKS(hay, needle) \
    EXPECT_EQ((hay).find(needle), std::string::npos) << "did not expect: " << (needle) << "\nin:\n" << (hay)

const std::string kScript = std::string(LLMT_SOURCE_DIR) + "/tests/launch/scripts/ddp_tiny.py";

class TorchScript : public ::testing::Test {
protected:
    void SetUp() override {
        if (system("/usr/bin/python3 -c 'import torch.distributed' >/dev/null 2>&1") != 0) {
            GTEST_SKIP() << "Debian's python3-torch is not installed at /usr/bin/python3";
        }
        char tmpl[] = "/tmp/llmt_torch_script_XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
    }
    void TearDown() override {
        if (!dir_.empty()) fs::remove_all(dir_);
    }

    // llmtrain launch --standalone --nproc-per-node 2 <flags> -- /usr/bin/python3 ddp_tiny.py <args>
    ProcResult launch(const std::vector<std::string>& flags, const std::vector<std::string>& args) {
        std::vector<std::string> argv = {llmtrain_bin(), "launch", "--standalone", "--nproc-per-node", "2",
                                         "--kill-grace-s", "5"};
        argv.insert(argv.end(), flags.begin(), flags.end());
        argv.insert(argv.end(), {"--", "/usr/bin/python3", kScript});
        argv.insert(argv.end(), args.begin(), args.end());
        // OMP_NUM_THREADS unset, as in a fresh shell: the launcher sets 1 for several workers, as torchrun.
        return run_process(prepend_env(argv), "", 180);
    }

    static std::vector<std::string> prepend_env(const std::vector<std::string>& argv) {
        std::vector<std::string> v = {"env", "-u", "OMP_NUM_THREADS", "-u", "TORCHELASTIC_ERROR_FILE"};
        v.insert(v.end(), argv.begin(), argv.end());
        return v;
    }

    std::string dir_;
};

TEST_F(TorchScript, DdpScriptTrainsWithTorchrunsEnvironment) {
    auto r = launch({"--rdzv-id", "job7"}, {"--steps", "3"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    for (int rank : {0, 1}) {
        const std::string p = "[rank " + std::to_string(rank) + "] ";
        EXPECT_HAS(r.out, p + "env RANK=" + std::to_string(rank) + " LOCAL_RANK=" + std::to_string(rank) +
                              " WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 GROUP_RANK=0 GROUP_WORLD_SIZE=1 ROLE_RANK=" +
                              std::to_string(rank) + " ROLE_NAME=default ROLE_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1");
        EXPECT_HAS(r.out, p + "allreduce ok sum=3\n");
        EXPECT_HAS(r.out, p + "done rank=" + std::to_string(rank) + " steps=3");
    }
    EXPECT_HAS(r.out, " TORCHELASTIC_RESTART_COUNT=0 TORCHELASTIC_MAX_RESTARTS=0 TORCHELASTIC_RUN_ID=job7 "
                      "TORCHELASTIC_USE_AGENT_STORE=False TORCHELASTIC_ERROR_FILE=/");
    EXPECT_HAS(r.out, "/job7_");
    EXPECT_HAS(r.out, "/attempt_0/1/error.json OMP_NUM_THREADS=1\n");
    EXPECT_LACKS(r.out, "<unset>");
    // torchrun's warning about the OMP_NUM_THREADS default.
    EXPECT_HAS(r.err, "OMP_NUM_THREADS is not set: each worker gets OMP_NUM_THREADS=1");
}

TEST_F(TorchScript, KilledWorkerIsRestartedAndTheRunSucceeds) {
    auto r = launch({"--max-restarts", "1"}, {"--fail-rank", "1", "--fail-how", "kill"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_HAS(r.err, "worker rank 1 (local rank 1, pid ");
    EXPECT_HAS(r.err, "with signal 9 (SIGKILL, exit code 137)");
    EXPECT_HAS(r.err, "no error file: the worker wrote nothing to ");  // a SIGKILL leaves no report
    EXPECT_HAS(r.err, "restarting all 2 worker(s) (restart 1 of 1)");
    EXPECT_HAS(r.out, "TORCHELASTIC_RESTART_COUNT=1 TORCHELASTIC_MAX_RESTARTS=1");
    EXPECT_HAS(r.out, "[rank 0] done rank=0 steps=3");
    EXPECT_HAS(r.out, "[rank 1] done rank=1 steps=3");
}

TEST_F(TorchScript, RaisedErrorReachesTheLaunchOutputThroughTheErrorFile) {
    const std::string logs = dir_ + "/logs";
    auto r =
        launch({"--log-dir", logs, "--rdzv-id", "err", "--tee", "3"}, {"--fail-rank", "0", "--fail-how", "raise"});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_HAS(r.err, "worker rank 0 (local rank 0, pid ");
    EXPECT_HAS(r.err, "with exit code 1\n  error file " + logs + "/err_");
    EXPECT_HAS(r.err, "/attempt_0/0/error.json:\n    RuntimeError: rank 0 fails on purpose on attempt 0\n");
    EXPECT_HAS(r.err, "    Traceback (most recent call last):\n");
    EXPECT_HAS(r.err, "not restarting (--max-restarts 0); logs and error files kept under " + logs + "/err_");
    // --tee 3: the console has the lines with their prefix, the files have them without.
    EXPECT_HAS(r.out, "[rank 1] allreduce ok sum=3\n");
    std::string run_dir;
    for (const auto& e : fs::directory_iterator(logs)) run_dir = e.path();
    ASSERT_FALSE(run_dir.empty());
    std::ifstream f(run_dir + "/attempt_0/1/stdout.log");
    std::stringstream s;
    s << f.rdbuf();
    EXPECT_HAS(s.str(), "allreduce ok sum=3\n");
    EXPECT_LACKS(s.str(), "[rank");
    EXPECT_TRUE(fs::exists(run_dir + "/attempt_0/0/error.json"));
}

}  // namespace
