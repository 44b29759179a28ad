// The CPU budget's parsers (core/cpu_budget.h) on the texts the kernel writes; the thread count they give under a
// real cgroup quota is tests/kernels/cpu_threads_test.cpp.
#include "core/cpu_budget.h"

#include <gtest/gtest.h>

namespace llmt {
namespace {

TEST(CpuBudget, ParsesCgroup2CpuMax) {
    EXPECT_FALSE(parse_cpu_max("max 100000\n"));
    EXPECT_DOUBLE_EQ(*parse_cpu_max("150000 100000\n"), 1.5);
    EXPECT_DOUBLE_EQ(*parse_cpu_max("50000 100000"), 0.5);
    EXPECT_DOUBLE_EQ(*parse_cpu_max("200000 50000\n"), 4.0);
    for (const char* bad : {"", "\n", "100000", "abc 100000", "100000 0", "-5 100000", "1 2 3", "100000 x"})
        EXPECT_FALSE(parse_cpu_max(bad)) << bad;
}

TEST(CpuBudget, ParsesCgroup1CfsQuota) {
    EXPECT_FALSE(parse_cfs_quota("-1\n", "100000\n"));
    EXPECT_DOUBLE_EQ(*parse_cfs_quota("250000\n", "100000\n"), 2.5);
    EXPECT_FALSE(parse_cfs_quota("", "100000"));     // the file is missing: no limit
    EXPECT_FALSE(parse_cfs_quota("50000", "0"));
    EXPECT_FALSE(parse_cfs_quota("50000", "abc"));
}

TEST(CpuBudget, FindsTheProcessCgroupPerHierarchy) {
    const char* hybrid = "9:name=systemd:/user.slice\n4:cpu,cpuacct:/kubepods/pod1/c1\n1:memory:/m\n0::/unified/x\n";
    EXPECT_EQ(*cgroup_path(hybrid, ""), "/unified/x");
    EXPECT_EQ(*cgroup_path(hybrid, "cpu"), "/kubepods/pod1/c1");
    EXPECT_FALSE(cgroup_path(hybrid, "cpuset"));
    EXPECT_FALSE(cgroup_path("4:cpuacct:/a\n", "cpu"));  // cpuacct is not cpu
    EXPECT_EQ(*cgroup_path("0::/\n", ""), "/");
    EXPECT_FALSE(cgroup_path("4:cpu:/a\n", ""));
}

TEST(CpuBudget, FindsCgroupMountsInMountinfo) {
    const char* mi =
        "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
        "32 31 0:29 /docker/abc /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct\n"
        "33 31 0:30 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n"
        "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate\n";
    const auto v1 = find_cgroup_mount(mi, false, "cpu");
    ASSERT_TRUE(v1);
    EXPECT_EQ(v1->mount_point, "/sys/fs/cgroup/cpu,cpuacct");
    EXPECT_EQ(v1->root, "/docker/abc");
    const auto v2 = find_cgroup_mount(mi, true, "");
    ASSERT_TRUE(v2);
    EXPECT_EQ(v2->mount_point, "/sys/fs/cgroup/unified");
    EXPECT_FALSE(find_cgroup_mount("31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n", true, ""));
    EXPECT_FALSE(find_cgroup_mount(mi, false, "cpuset"));
}

TEST(CpuBudget, ThreadsAreTheAffinityCappedByTheQuotaRoundedUp) {
    CpuBudget b;
    b.affinity_cpus = 8;
    EXPECT_EQ(b.threads(), 8);
    b.quota_cpus = 1.5;
    EXPECT_EQ(b.threads(), 2);
    b.quota_cpus = 0.2;
    EXPECT_EQ(b.threads(), 1);  // a fraction of a CPU still runs one thread
    b.quota_cpus = 16.0;
    EXPECT_EQ(b.threads(), 8);  // the quota never raises the count above the mask
    b.quota_cpus = 3.0;
    EXPECT_EQ(b.threads(), 3);
    EXPECT_NE(b.describe().find("quota 3 CPUs"), std::string::npos) << b.describe();
}

TEST(CpuBudget, ReadsThisProcessWithoutThrowing) {
    const CpuBudget b = read_cpu_budget();
    EXPECT_GE(b.affinity_cpus, 1);
    EXPECT_GE(b.threads(), 1);
    EXPECT_LE(b.threads(), b.affinity_cpus);
}

}  // namespace
}  // namespace llmt
