// How many CPUs this process may use: the affinity mask (sched_getaffinity: taskset, cpuset cgroups,
// Kubernetes' static CPU manager) and the cgroup CPU quota (cgroup v2 cpu.max, v1 cpu.cfs_quota_us /
// cpu.cfs_period_us, at the process's cgroup and every ancestor: Kubernetes' CPU limits, docker --cpus). The
// OpenMP default thread count is this, not the host's core count, as the JVM and Go (automaxprocs) do: more
// threads than the quota allows only get throttled in turn, and every barrier waits for the throttled one.
// Thread safety: the parsers are pure; read_cpu_budget reads /proc and /sys and may run on any thread.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace llmt {

struct CpuBudget {
    int affinity_cpus = 1;              // CPUs in the affinity mask
    std::optional<double> quota_cpus;   // the tightest cgroup quota in CPUs (1.5 = 150 ms per 100 ms); none: no limit
    std::string quota_source;           // the file that set it, for the log
    // Threads to run: the affinity count, lowered to the quota rounded up (0.5 CPU still gets one thread).
    int threads() const;
    // "2 CPUs (affinity), quota 1.5 CPUs (/sys/fs/cgroup/x/cpu.max)" for logs.
    std::string describe() const;
};

// cgroup v2 cpu.max: "max 100000" -> none; "150000 100000" -> 1.5 CPUs. Malformed text -> none.
std::optional<double> parse_cpu_max(std::string_view text);
// cgroup v1: cpu.cfs_quota_us "-1" -> none; "50000" with period "100000" -> 0.5 CPUs. Malformed -> none.
std::optional<double> parse_cfs_quota(std::string_view quota, std::string_view period);

// The process's cgroup path for a hierarchy from /proc/self/cgroup's text: controller "" is the v2 (unified)
// line "0::/path"; "cpu" is the v1 line whose controller list holds "cpu" ("4:cpu,cpuacct:/path"). nullopt when
// there is no such line.
std::optional<std::string> cgroup_path(std::string_view proc_self_cgroup, std::string_view controller);

// Where the hierarchy is mounted, from /proc/self/mountinfo's text: fstype "cgroup2", or "cgroup" with
// super-option `controller` ("cpu"). Returns the mount point and the mount's root inside the hierarchy (a
// container sees its own cgroup as "/"), or nullopt.
struct CgroupMount {
    std::filesystem::path mount_point;
    std::string root;
};
std::optional<CgroupMount> find_cgroup_mount(std::string_view mountinfo, bool v2, std::string_view controller);

// The budget of the calling process, read now (/proc/self/status... sched_getaffinity, mountinfo, cgroup files).
// Never throws: what cannot be read counts as no limit.
CpuBudget read_cpu_budget();

// read_cpu_budget().threads(), read once per process.
int default_cpu_threads();

}  // namespace llmt
