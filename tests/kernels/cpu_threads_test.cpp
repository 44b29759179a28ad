// The thread-count decisions (kernels/cpu/threads.h): per op size, and the process default under a real cgroup
// CPU quota. The quota test moves a child process into a new cgroup (v2 cpu.max where the cpu controller is on
// the unified hierarchy, else v1 cpu.cfs_quota_us), re-executes this binary there and reads the thread count
// apply_cpu_threads(0) chose; it skips, saying why, where no writable cgroup with the cpu controller exists (not
// root, a read-only /sys/fs/cgroup) or this process has a single CPU (every quota then gives one thread).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "core/cpu_budget.h"
#include "kernels/cpu/threads.h"

namespace llmt::kernels::cpu {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

bool write_file(const fs::path& p, const std::string& text) {
    std::ofstream out(p);
    out << text;
    out.flush();
    return static_cast<bool>(out);
}

TEST(CpuThreads, SmallOpsGetFewerThreads) {
    const ScopedOmpThreads four(4);
    EXPECT_EQ(omp_get_max_threads(), 4);
    EXPECT_EQ(threads_for_flops(0), 1);
    EXPECT_EQ(threads_for_flops(2.0 * 1 * 768 * 256), 1);  // a decode step's GEMM row
    EXPECT_EQ(threads_for_flops(2.5 * kMinFlopsPerThread), 2);
    EXPECT_EQ(threads_for_flops(2.0 * 2048 * 768 * 256), 4);  // a training GEMM
    {
        const ScopedOmpThreads one(threads_for_flops(1e3));
        EXPECT_EQ(omp_get_max_threads(), 1);
    }
    EXPECT_EQ(omp_get_max_threads(), 4);  // restored
}

// The rule itself, for the shapes of a small model's decode (GPT-2 tiny: d_model 256, d_ff 1024, vocabulary 50257)
// under several budgets: a decode step's GEMV rows stay on one thread whatever the budget, its LM head and a
// prefill's GEMMs spread up to the budget, and a budget of one (or a bad one) always gives one.
TEST(CpuThreads, DecodeOpThreadsUnderABudget) {
    const double qkv_row = 2.0 * 1 * 768 * 256, fc_row = 2.0 * 1 * 1024 * 256;
    const double lm_head_row = 2.0 * 1 * 50257 * 256;  // 25.7 MFLOP: 3 threads' worth
    const double prefill_fc = 2.0 * 128 * 1024 * 256;  // 67 MFLOP: 8 threads' worth
    for (int budget : {1, 2, 4, 16}) {
        SCOPED_TRACE(budget);
        EXPECT_EQ(threads_for_work(qkv_row, budget), 1);
        EXPECT_EQ(threads_for_work(fc_row, budget), 1);
        EXPECT_EQ(threads_for_work(lm_head_row, budget), std::min(budget, 3));
        EXPECT_EQ(threads_for_work(prefill_fc, budget), std::min(budget, 8));
    }
    EXPECT_EQ(threads_for_work(0, 8), 1);
    EXPECT_EQ(threads_for_work(kMinFlopsPerThread - 1, 8), 1);
    EXPECT_EQ(threads_for_work(kMinFlopsPerThread, 8), 1);
    EXPECT_EQ(threads_for_work(2 * kMinFlopsPerThread, 8), 2);
    EXPECT_EQ(threads_for_work(1e12, 0), 1);  // no budget reported: still one thread
    EXPECT_EQ(threads_for_work(1e12, -3), 1);
}

TEST(CpuThreads, RunThreadsWinsOverTheDefault) {
    const int before = omp_get_max_threads();
    EXPECT_EQ(apply_cpu_threads(3), 3);
    EXPECT_EQ(omp_get_max_threads(), 3);
    omp_set_num_threads(before);
}

// A cgroup with a CPU quota of `cpus`, removed at destruction; empty when none can be made (why: skip_reason).
class QuotaCgroup {
public:
    explicit QuotaCgroup(double cpus) {
        const std::string mountinfo = slurp("/proc/self/mountinfo");
        if (const auto v2 = find_cgroup_mount(mountinfo, true, "");
            v2 && slurp(v2->mount_point / "cgroup.controllers").find("cpu") != std::string::npos) {
            // Under the hierarchy's root (exempt from cgroup v2's no-internal-processes rule) with cpu enabled.
            write_file(v2->mount_point / "cgroup.subtree_control", "+cpu");
            make(v2->mount_point, [&](const fs::path& d) {
                return write_file(d / "cpu.max", std::to_string(static_cast<long>(cpus * 100000)) + " 100000");
            });
        } else if (const auto v1 = find_cgroup_mount(mountinfo, false, "cpu")) {
            make(v1->mount_point, [&](const fs::path& d) {
                return write_file(d / "cpu.cfs_period_us", "100000") &&
                       write_file(d / "cpu.cfs_quota_us", std::to_string(static_cast<long>(cpus * 100000)));
            });
        } else {
            why_ = "no cgroup hierarchy with the cpu controller in /proc/self/mountinfo";
        }
    }
    ~QuotaCgroup() {
        if (!dir_.empty()) ::rmdir(dir_.c_str());
    }
    const fs::path& dir() const { return dir_; }
    const std::string& skip_reason() const { return why_; }

private:
    template <class SetQuota>
    void make(const fs::path& parent, SetQuota set_quota) {
        const fs::path d = parent / ("llmt_quota_test_" + std::to_string(::getpid()));
        if (::mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) {
            why_ = "cannot create " + d.string() + ": " + std::strerror(errno);
            return;
        }
        dir_ = d;
        if (!set_quota(d)) why_ = "cannot write the quota under " + d.string();
    }
    fs::path dir_;
    std::string why_;
};

// The child's side (run by the parent through /proc/self/exe with this test selected and the variable set).
TEST(CpuThreads, ChildReportsItsDefault) {
    if (!std::getenv("LLMT_CPU_THREADS_CHILD")) GTEST_SKIP() << "runs only as CpuQuota's child process";
    std::printf("threads=%d\n", apply_cpu_threads(0));
}

// Runs the child inside `cg` and returns the thread count it chose.
std::optional<int> child_threads(const QuotaCgroup& cg) {
    int out[2];
    if (::pipe(out) != 0) return std::nullopt;
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(out[1], 1);
        std::ofstream procs(cg.dir() / "cgroup.procs");
        procs << ::getpid() << std::flush;
        if (!procs) ::_exit(3);
        ::unsetenv("OMP_NUM_THREADS");
        ::setenv("LLMT_CPU_THREADS_CHILD", "1", 1);
        char filter[] = "--gtest_filter=CpuThreads.ChildReportsItsDefault";
        char self[] = "/proc/self/exe";
        char* argv[] = {self, filter, nullptr};
        ::execv(self, argv);
        ::_exit(4);
    }
    ::close(out[1]);
    std::string text;
    char buf[256];
    for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
    ::close(out[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    const size_t at = text.find("threads=");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || at == std::string::npos) {
        ADD_FAILURE() << "child exited with " << status << ", output:\n" << text;
        return std::nullopt;
    }
    return std::atoi(text.c_str() + at + 8);
}

TEST(CpuThreads, DefaultFollowsTheCgroupQuota) {
    const CpuBudget here = read_cpu_budget();
    if (here.affinity_cpus < 2) GTEST_SKIP() << "this process has one CPU: every quota gives one thread";
    {
        const QuotaCgroup half(0.5);
        if (!half.skip_reason().empty()) GTEST_SKIP() << "no cgroup to set a quota in: " << half.skip_reason();
        EXPECT_EQ(child_threads(half), 1) << "0.5 CPU of quota runs one thread (" << half.dir() << ")";
    }
    const double cpus = here.affinity_cpus - 0.5;  // 1.5 of 2 CPUs: rounded up, all of them
    const QuotaCgroup most(cpus);
    ASSERT_TRUE(most.skip_reason().empty()) << most.skip_reason();
    EXPECT_EQ(child_threads(most), here.threads()) << "a quota of " << cpus << " CPUs";
}

}  // namespace
}  // namespace llmt::kernels::cpu
