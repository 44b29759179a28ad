// `llmtrain launch` through the real binary with small shell workers (--exec): the environment of each
// rank, [rank k] prefixes on both streams, failure teardown and exit codes, restarts, signal forwarding
// (no process survives), free ports with --standalone and two launchers side by side.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "support/subprocess.h"

namespace {

using llmt::testing::llmtrain_bin;
using llmt::testing::ProcResult;
using llmt::testing::run_process;
using Clock = std::chrono::steady_clock;

#define EXPECT_HAS(hay, needle) \
    EXPECT_NE((hay).find(needle), std::string::npos) << "looked for: " << (needle) << "\nin:\n" << (hay)

class Launch : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/llmt_launch_test_XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
    }
    void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

    std::string script(const std::string& name, const std::string& body) {
        std::string path = dir_ + "/" + name;
        std::ofstream(path) << "#!/bin/bash\n" << body << "\n";
        chmod(path.c_str(), 0755);
        return path;
    }

    // llmtrain launch <flags> --exec <program> -- <args>
    ProcResult launch(std::vector<std::string> flags, const std::string& program, std::vector<std::string> args = {},
                      const std::vector<std::string>& env = {}, double timeout_s = 60) {
        std::vector<std::string> argv = {llmtrain_bin(), "launch"};
        argv.insert(argv.end(), flags.begin(), flags.end());
        argv.insert(argv.end(), {"--exec", program, "--"});
        argv.insert(argv.end(), args.begin(), args.end());
        return run_process(argv, "", timeout_s, env);
    }

    std::string dir_;
};

std::string slurp(const std::string& path) {
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

bool wait_for_file(const std::string& path, double timeout_s) {
    auto end = Clock::now() + std::chrono::duration<double>(timeout_s);
    while (Clock::now() < end) {
        std::ifstream f(path);
        std::string line;
        if (f && std::getline(f, line) && !line.empty()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
}

// True while pid names a process that has not exited (a zombie counts as exited: its reaper may be an
// init that is slow to collect it).
bool alive(pid_t pid) {
    if (kill(pid, 0) != 0) return false;
    std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
    auto rp = stat.rfind(')');
    return rp != std::string::npos && rp + 2 < stat.size() && stat[rp + 2] != 'Z';
}

pid_t read_pid(const std::string& path) { return static_cast<pid_t>(std::stol(slurp(path))); }

// Each line of `text`; a trailing partial line counts too.
std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> out;
    std::stringstream s(text);
    for (std::string l; std::getline(s, l);) out.push_back(l);
    return out;
}

// The launcher in the background with its output in files, for signal tests.
struct Background {
    pid_t pid = -1;
    std::string out, err;
};

Background start_launcher(const std::vector<std::string>& args, const std::string& dir, const std::string& tag) {
    Background b;
    b.out = dir + "/" + tag + ".out";
    b.err = dir + "/" + tag + ".err";
    std::vector<std::string> argv = {llmtrain_bin(), "launch"};
    argv.insert(argv.end(), args.begin(), args.end());
    b.pid = fork();
    if (b.pid == 0) {
        (void)!freopen(b.out.c_str(), "w", stdout);
        (void)!freopen(b.err.c_str(), "w", stderr);
        std::vector<char*> c;
        for (auto& a : argv) c.push_back(a.data());
        c.push_back(nullptr);
        execv(c[0], c.data());
        _exit(127);
    }
    return b;
}

// Exit code (128 + signal for a signal), or -1 after SIGKILLing it on timeout.
int wait_exit(pid_t pid, double timeout_s) {
    auto end = Clock::now() + std::chrono::duration<double>(timeout_s);
    int status = 0;
    while (Clock::now() < end) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

TEST_F(Launch, EachRankGetsTheWorkerEnvironment) {
    auto w = script(
        "env.sh",
        "echo \"env RANK=$RANK LOCAL_RANK=$LOCAL_RANK WORLD_SIZE=$WORLD_SIZE LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE "
        "GROUP_RANK=$GROUP_RANK MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT "
        "RESTARTS=$TORCHELASTIC_RESTART_COUNT AGENT_STORE=${TORCHELASTIC_USE_AGENT_STORE-unset} "
        "OMP=$OMP_NUM_THREADS args=$*\"\n"
        "echo \"to stderr from $RANK\" >&2");
    // Node 1 of 2 with 3 workers: ranks 3..5. No rendezvous happens, so the master needs not exist.
    auto r = launch({"--nnodes", "2", "--node-rank", "1", "--nproc-per-node", "3", "--master-addr", "10.9.8.7",
                     "--master-port", "12345"},
                    w, {"a", "b c"}, {"OMP_NUM_THREADS=", "TORCHELASTIC_USE_AGENT_STORE=True"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (int lr = 0; lr < 3; ++lr) {
        int rank = 3 + lr;
        EXPECT_HAS(r.out, "[rank " + std::to_string(rank) + "] env RANK=" + std::to_string(rank) +
                              " LOCAL_RANK=" + std::to_string(lr) +
                              " WORLD_SIZE=6 LOCAL_WORLD_SIZE=3 GROUP_RANK=1 MASTER_ADDR=10.9.8.7 MASTER_PORT=12345 "
                              "RESTARTS=0 AGENT_STORE=False OMP=");
        EXPECT_HAS(r.err, "[rank " + std::to_string(rank) + "] to stderr from " + std::to_string(rank) + "\n");
    }
    EXPECT_HAS(r.out, "args=a b c\n");
    for (const auto& l : lines(r.out)) EXPECT_EQ(l.rfind("[rank ", 0), 0u) << l;
    // The start-up line names every value's source.
    EXPECT_HAS(r.err, "nnodes=2 (--nnodes) node_rank=1 (--node-rank) nproc_per_node=3 (--nproc-per-node)");
}

TEST_F(Launch, OmpThreadsDefaultIsTorchrunsForProgramsAndSplitsTheCpusForTrain) {
    // Another program gets torchrun's rule: 1 for several workers when unset (with its warning), unset for
    // one worker, and a value that is set (even empty) passes through.
    auto w = script("omp.sh", "echo \"omp=${OMP_NUM_THREADS-unset}\"");
    auto unset = [&](std::vector<std::string> flags) {
        std::vector<std::string> argv = {"env", "-u", "OMP_NUM_THREADS", llmtrain_bin(), "launch"};
        argv.insert(argv.end(), flags.begin(), flags.end());
        argv.insert(argv.end(), {"--exec", w, "--"});
        return run_process(argv, "", 60);
    };
    auto r = unset({"--nproc-per-node", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_HAS(r.out, "[rank 1] omp=1\n");
    EXPECT_HAS(r.err, "OMP_NUM_THREADS is not set: each worker gets OMP_NUM_THREADS=1");
    r = unset({"--nproc-per-node", "1"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_HAS(r.out, "[rank 0] omp=unset\n");
    r = launch({"--nproc-per-node", "2"}, w, {}, {"OMP_NUM_THREADS=5"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_HAS(r.out, "[rank 0] omp=5\n");
    EXPECT_HAS(r.out, "[rank 1] omp=5\n");
    // Our trainer gets CPUs / workers (shown by --dry-run, which prints each worker's environment).
    r = run_process({"env", "-u", "OMP_NUM_THREADS", llmtrain_bin(), "launch", "--nproc-per-node", "2", "--dry-run",
                     "--", "train", "--config", "c.yaml"},
                    "", 60);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    cpu_set_t set;
    CPU_ZERO(&set);
    sched_getaffinity(0, sizeof set, &set);
    const int expect = std::max(1, CPU_COUNT(&set) / 2);
    EXPECT_HAS(r.out, "OMP_NUM_THREADS=" + std::to_string(expect) + " ");
    EXPECT_EQ(r.err.find("OMP_NUM_THREADS is not set"), std::string::npos) << r.err;
}

TEST_F(Launch, LinesAreNeverInterleaved) {
    // Each line is written in two pieces (two printf calls), so the pipe often holds half lines.
    auto w = script("halves.sh",
                    "for i in $(seq 400); do printf 'first-half-%s-%s-' $RANK $i; printf 'second-half-%s\\n' $RANK; "
                    "printf 'err-%s-' $RANK >&2; printf 'end-%s\\n' $RANK >&2; done\n"
                    "printf 'no newline at the end %s' $RANK");
    auto r = launch({"--nproc-per-node", "3"}, w);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::regex out_line(R"(\[rank (\d)\] (first-half-(\d)-\d+-second-half-(\d)|no newline at the end (\d)))");
    int count = 0;
    for (const auto& l : lines(r.out)) {
        std::smatch m;
        ASSERT_TRUE(std::regex_match(l, m, out_line)) << l;
        if (m[3].matched) {
            EXPECT_EQ(m[1], m[3]) << l;
            EXPECT_EQ(m[1], m[4]) << l;
        } else {
            EXPECT_EQ(m[1], m[5]) << l;
        }
        ++count;
    }
    EXPECT_EQ(count, 3 * 401);
    std::regex err_line(R"(\[rank (\d)\] err-(\d)-end-(\d))");
    int err_count = 0;
    for (const auto& l : lines(r.err)) {
        if (l.rfind("llmtrain launch:", 0) == 0) continue;
        std::smatch m;
        ASSERT_TRUE(std::regex_match(l, m, err_line)) << l;
        EXPECT_EQ(m[1], m[2]);
        EXPECT_EQ(m[1], m[3]);
        ++err_count;
    }
    EXPECT_EQ(err_count, 3 * 400);
}

TEST_F(Launch, AFailingWorkerStopsTheOthersAndItsCodeIsReturned) {
    // Rank 0 and 2 run forever with a grandchild; rank 1 fails once they have written their pids.
    auto w = script(
        "fail.sh",
        "D=" + dir_ +
            "\n"
            "sleep 1000 & echo $! > $D/child.$RANK\n"
            "echo $$ > $D/pid.$RANK\n"
            "if [ $RANK = 1 ]; then while [ ! -s $D/pid.0 ] || [ ! -s $D/pid.2 ]; do sleep 0.05; done; exit 7; fi\n"
            "wait");
    auto t0 = Clock::now();
    auto r = launch({"--nproc-per-node", "3"}, w);
    EXPECT_EQ(r.exit_code, 7) << r.err;
    // SIGTERM ends bash and sleep at once; 20 s would mean we waited for something else.
    EXPECT_LT(seconds_since(t0), 20);
    EXPECT_HAS(r.err, "worker rank 1");
    EXPECT_HAS(r.err, "exit code 7");
    for (int rank = 0; rank < 3; ++rank) {
        for (const char* what : {"pid", "child"}) {
            pid_t p = read_pid(dir_ + "/" + what + "." + std::to_string(rank));
            EXPECT_FALSE(alive(p)) << what << " of rank " << rank << " (pid " << p << ") survived";
        }
    }
}

TEST_F(Launch, WorkersIgnoringSigtermAreKilledAfterTheGracePeriod) {
    auto w = script("stubborn.sh",
                    "D=" + dir_ + "\n"
                    "trap '' TERM\n"
                    "echo $$ > $D/pid.$RANK\n"
                    "if [ $RANK = 1 ]; then while [ ! -s $D/pid.0 ]; do sleep 0.05; done; kill -9 $$; fi\n"
                    "while true; do sleep 0.1; done");
    auto t0 = Clock::now();
    auto r = launch({"--nproc-per-node", "2", "--kill-grace-s", "1"}, w);
    // Rank 1 died of SIGKILL: 128 + 9.
    EXPECT_EQ(r.exit_code, 137) << r.err;
    EXPECT_GE(seconds_since(t0), 1.0);
    EXPECT_HAS(r.err, "sending SIGKILL");
    EXPECT_FALSE(alive(read_pid(dir_ + "/pid.0")));
}

TEST_F(Launch, RestartsAllWorkersWithTheRestartCount) {
    auto w = script(
        "flaky.sh",
        "D=" + dir_ +
            "\n"
            "echo \"attempt $TORCHELASTIC_RESTART_COUNT of max $TORCHELASTIC_MAX_RESTARTS args=$*\"\n"
            "if [ $TORCHELASTIC_RESTART_COUNT = 0 ] && [ $RANK = 0 ]; then touch $D/started; sleep 1000; fi\n"
            "if [ $TORCHELASTIC_RESTART_COUNT = 0 ]; then while [ ! -e $D/started ]; do sleep 0.05; done; exit 3; fi");
    auto r = launch({"--nproc-per-node", "2", "--max-restarts", "1"}, w, {"x"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_HAS(r.out, "[rank 0] attempt 0 of max 1 args=x\n");
    EXPECT_HAS(r.out, "[rank 0] attempt 1 of max 1 args=x\n");
    EXPECT_HAS(r.out, "[rank 1] attempt 1 of max 1 args=x\n");
    EXPECT_HAS(r.err, "restarting all 2 worker(s) (restart 1 of 1)");

    // Out of restarts: the last failure's code.
    auto bad = script("bad.sh", "echo \"attempt $TORCHELASTIC_RESTART_COUNT\"; exit 5");
    r = launch({"--max-restarts", "2"}, bad);
    EXPECT_EQ(r.exit_code, 5);
    EXPECT_HAS(r.out, "[rank 0] attempt 2\n");
    EXPECT_EQ(r.out.find("attempt 3"), std::string::npos);
    EXPECT_HAS(r.err, "no restart left (--max-restarts 2)");
}

TEST_F(Launch, BadInputIsNotRestarted) {
    // The real `train` subcommand on a missing config exits 2: a restart would fail the same way.
    auto r = run_process({llmtrain_bin(), "launch", "--max-restarts", "3", "--", "train", "--config",
                          dir_ + "/missing.yaml"},
                         "", 60);
    EXPECT_EQ(r.exit_code, 2) << r.err;  // train's exit code for bad input, passed through
    EXPECT_HAS(r.err, "[rank 0] llmtrain: error:");
    EXPECT_HAS(r.err, "not restarting, a restart would fail the same way");
    EXPECT_EQ(r.err.find("restarting all"), std::string::npos) << r.err;
    // An --exec program's 2 means nothing to us: restarted like any failure.
    auto w = script("two.sh", "echo \"attempt $TORCHELASTIC_RESTART_COUNT\"; exit 2");
    r = launch({"--max-restarts", "1"}, w);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_HAS(r.out, "[rank 0] attempt 1\n");
}

TEST_F(Launch, SigtermReachesEveryWorkerAndNothingSurvives) {
    auto w = script("term.sh",
                    "D=" + dir_ + "\n"
                    "trap 'echo \"rank $RANK got TERM\"; exit 0' TERM\n"
                    "sleep 1000 & echo $! > $D/child.$RANK\n"
                    "echo $$ > $D/pid.$RANK\n"
                    "wait");
    auto b = start_launcher({"--nproc-per-node", "3", "--exec", w}, dir_, "l");
    for (int rank = 0; rank < 3; ++rank) ASSERT_TRUE(wait_for_file(dir_ + "/pid." + std::to_string(rank), 30));
    kill(b.pid, SIGTERM);
    // Workers that exit 0 on SIGTERM: the launcher reports the signal, 128 + 15.
    EXPECT_EQ(wait_exit(b.pid, 30), 143) << slurp(b.err);
    auto out = slurp(b.out);
    for (int rank = 0; rank < 3; ++rank) {
        EXPECT_HAS(out, "[rank " + std::to_string(rank) + "] rank " + std::to_string(rank) + " got TERM\n");
        for (const char* what : {"pid", "child"}) {
            pid_t p = read_pid(dir_ + "/" + what + "." + std::to_string(rank));
            EXPECT_FALSE(alive(p)) << what << " of rank " << rank << " survived";
        }
    }
    EXPECT_HAS(slurp(b.err), "received SIGTERM; forwarding it to 3 worker(s)");
}

TEST_F(Launch, ASecondSignalKillsAtOnce) {
    auto w = script("deaf.sh",
                    "trap '' TERM INT\n"
                    "echo $$ > " + dir_ + "/pid.$RANK\n"
                    "while true; do sleep 0.1; done");
    auto b = start_launcher({"--nproc-per-node", "2", "--kill-grace-s", "600", "--exec", w}, dir_, "l");
    for (int rank = 0; rank < 2; ++rank) ASSERT_TRUE(wait_for_file(dir_ + "/pid." + std::to_string(rank), 30));
    kill(b.pid, SIGINT);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto t0 = Clock::now();
    kill(b.pid, SIGINT);
    EXPECT_EQ(wait_exit(b.pid, 30), 137) << slurp(b.err);  // workers killed by SIGKILL
    EXPECT_LT(seconds_since(t0), 10);  // not the 600 s grace period
    for (int rank = 0; rank < 2; ++rank) EXPECT_FALSE(alive(read_pid(dir_ + "/pid." + std::to_string(rank))));
}

TEST_F(Launch, StandalonePicksAFreePortAndTwoJobsRunSideBySide) {
    // tcp_ping: rank 0 listens on MASTER_PORT, the others connect to it, so a port clash would fail a job.
    std::vector<Background> jobs;
    for (int j = 0; j < 2; ++j) {
        jobs.push_back(start_launcher({"--standalone", "--nproc-per-node", "3", "--exec", LLMT_TCP_PING_BIN}, dir_,
                                      "job" + std::to_string(j)));
    }
    std::vector<std::string> ports;
    for (auto& b : jobs) {
        EXPECT_EQ(wait_exit(b.pid, 60), 0) << slurp(b.err);
        auto out = slurp(b.out);
        EXPECT_HAS(out, "[rank 1] rank 1 reached 127.0.0.1");
        EXPECT_HAS(out, "[rank 2] rank 2 reached 127.0.0.1");
        EXPECT_HAS(out, "[rank 0] rank 0 got: hello from rank 1");
        std::smatch m;
        ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(master 127\.0\.0\.1:(\d+))"))) << out;
        ports.push_back(m[1]);
        EXPECT_NE(m[1], "29500");
        EXPECT_HAS(slurp(b.err), "nnodes=1 (--standalone)");
    }
    EXPECT_NE(ports[0], ports[1]);
}

// Without --standalone or --master-port, one node picks a free port too, so two launches on one host do
// not both take torchrun's 29500 (the second would fail).
TEST_F(Launch, OneNodeDefaultsToAFreePortSoTwoLaunchesRunSideBySide) {
    std::vector<Background> jobs;
    for (int j = 0; j < 2; ++j)
        jobs.push_back(
            start_launcher({"--nproc-per-node", "2", "--exec", LLMT_TCP_PING_BIN}, dir_, "plain" + std::to_string(j)));
    std::vector<std::string> ports;
    for (auto& b : jobs) {
        EXPECT_EQ(wait_exit(b.pid, 60), 0) << slurp(b.err);
        auto out = slurp(b.out);
        EXPECT_HAS(out, "[rank 0] rank 0 got: hello from rank 1");
        std::smatch m;
        ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(master 127\.0\.0\.1:(\d+))"))) << out;
        ports.push_back(m[1]);
        EXPECT_NE(m[1], "29500");
    }
    EXPECT_NE(ports[0], ports[1]);
}

TEST_F(Launch, MasterPortZeroOnOneNodePicksAFreePort) {
    auto r = launch({"--nproc-per-node", "2", "--master-port", "0"}, LLMT_TCP_PING_BIN);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_HAS(r.out, "[rank 1] rank 1 reached 127.0.0.1");
}

TEST_F(Launch, KubeflowVariablesThroughTheBinary) {
    auto r = run_process({llmtrain_bin(), "launch", "--dry-run", "--", "train", "--config", "c.yaml"}, "", 30,
                         {"PET_NNODES=2", "PET_NODE_RANK=1", "PET_NPROC_PER_NODE=2", "PET_MASTER_ADDR=job-0.svc",
                          "PET_MASTER_PORT=23456", "OMP_NUM_THREADS=1"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_HAS(r.err, "nnodes=2 (PET_NNODES) node_rank=1 (PET_NODE_RANK) nproc_per_node=2 (PET_NPROC_PER_NODE)");
    EXPECT_HAS(r.out, "RANK=2 LOCAL_RANK=0 WORLD_SIZE=4");
    EXPECT_HAS(r.out, "RANK=3 LOCAL_RANK=1 WORLD_SIZE=4");
    EXPECT_HAS(r.out, "MASTER_ADDR=job-0.svc MASTER_PORT=23456");
    EXPECT_HAS(r.out, " train --config c.yaml\n");
}

TEST_F(Launch, UsageErrorsExitTwo) {
    auto r = run_process({llmtrain_bin(), "launch", "--nproc-per-node", "2"}, "", 30);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_HAS(r.err, "no worker command");
    r = run_process({llmtrain_bin(), "launch", "--nnodes", "2", "--node-rank", "0", "--", "train"}, "", 30,
                    {"MASTER_ADDR=", "PET_MASTER_ADDR="});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_HAS(r.err, "no master address");
    r = run_process({llmtrain_bin(), "launch", "--", "train"}, "", 30, {"JOB_COMPLETION_INDEX=3"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_HAS(r.err, "node rank 3 (from JOB_COMPLETION_INDEX) must be < nnodes 1 (from default)");
}

TEST_F(Launch, AProgramThatCannotRunFailsWith127) {
    auto r = launch({}, dir_ + "/does-not-exist");
    EXPECT_EQ(r.exit_code, 127);
    EXPECT_HAS(r.err, "[rank 0] llmtrain launch: cannot run '" + dir_ + "/does-not-exist'");
}

}  // namespace
