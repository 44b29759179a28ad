// CPU budget from the affinity mask and the cgroup quota (cpu_budget.h).
#include "core/cpu_budget.h"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

namespace llmt {
namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    return s;
}

std::optional<long long> parse_int(std::string_view s) {
    s = trim(s);
    long long v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
    return v;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
    std::vector<std::string_view> out;
    size_t start = 0;
    for (size_t i = 0; i <= s.size(); i++) {
        if (i == s.size() || s[i] == sep) {
            out.push_back(s.substr(start, i - start));
            start = i + 1;
        }
    }
    return out;
}

std::string read_text(const std::filesystem::path& p) {
    std::ifstream in(p);
    if (!in) return {};
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

int affinity_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
    return std::max(1, CPU_COUNT(&set));
}

// The cgroup's directory and its ancestors up to the mount, innermost first.
std::vector<std::filesystem::path> cgroup_dirs(const CgroupMount& m, std::string path) {
    if (m.root != "/" && path.rfind(m.root, 0) == 0) path = path.substr(m.root.size());
    std::vector<std::filesystem::path> dirs;
    std::filesystem::path rel = std::filesystem::path(path).relative_path();
    while (true) {
        dirs.push_back(m.mount_point / rel);
        if (rel.empty()) break;
        rel = rel.parent_path();
    }
    return dirs;
}

void tighten(CpuBudget& b, std::optional<double> q, const std::filesystem::path& source) {
    if (q && (!b.quota_cpus || *q < *b.quota_cpus)) {
        b.quota_cpus = q;
        b.quota_source = source.string();
    }
}

}  // namespace

int CpuBudget::threads() const {
    int n = affinity_cpus;
    if (quota_cpus) n = std::min(n, static_cast<int>(std::ceil(*quota_cpus - 1e-9)));
    return std::max(1, n);
}

std::string CpuBudget::describe() const {
    std::string s = fmt::format("{} CPU{} in the affinity mask", affinity_cpus, affinity_cpus == 1 ? "" : "s");
    if (quota_cpus) s += fmt::format(", cgroup quota {:g} CPUs ({})", *quota_cpus, quota_source);
    return s;
}

std::optional<double> parse_cpu_max(std::string_view text) {
    const auto f = split(trim(text), ' ');
    if (f.size() != 2) return std::nullopt;
    const auto period = parse_int(f[1]);
    if (!period || *period <= 0) return std::nullopt;
    if (trim(f[0]) == "max") return std::nullopt;
    const auto quota = parse_int(f[0]);
    if (!quota || *quota <= 0) return std::nullopt;
    return static_cast<double>(*quota) / static_cast<double>(*period);
}

std::optional<double> parse_cfs_quota(std::string_view quota, std::string_view period) {
    const auto q = parse_int(quota), p = parse_int(period);
    if (!q || !p || *q <= 0 || *p <= 0) return std::nullopt;  // -1: no limit
    return static_cast<double>(*q) / static_cast<double>(*p);
}

std::optional<std::string> cgroup_path(std::string_view proc_self_cgroup, std::string_view controller) {
    for (std::string_view line : split(proc_self_cgroup, '\n')) {
        const size_t a = line.find(':');
        const size_t b = a == std::string_view::npos ? a : line.find(':', a + 1);
        if (b == std::string_view::npos) continue;
        const std::string_view ctrls = line.substr(a + 1, b - a - 1);
        const std::string path(trim(line.substr(b + 1)));
        if (controller.empty()) {
            if (line.substr(0, a) == "0" && ctrls.empty()) return path;
            continue;
        }
        for (std::string_view c : split(ctrls, ','))
            if (c == controller) return path;
    }
    return std::nullopt;
}

std::optional<CgroupMount> find_cgroup_mount(std::string_view mountinfo, bool v2, std::string_view controller) {
    // mountinfo: id parent major:minor root mount_point options [optional fields...] - fstype source super_options
    for (std::string_view line : split(mountinfo, '\n')) {
        const auto f = split(trim(line), ' ');
        const auto dash = std::find(f.begin(), f.end(), "-");
        if (f.size() < 5 || dash == f.end() || f.end() - dash < 4) continue;
        const std::string_view fstype = dash[1], super = dash[3];
        if (v2 ? fstype != "cgroup2" : fstype != "cgroup") continue;
        if (!v2) {
            const auto opts = split(super, ',');
            if (std::find(opts.begin(), opts.end(), controller) == opts.end()) continue;
        }
        return CgroupMount{std::filesystem::path(std::string(f[4])), std::string(f[3])};
    }
    return std::nullopt;
}

CpuBudget read_cpu_budget() {
    CpuBudget b;
    b.affinity_cpus = affinity_cpus();
    const std::string cgroups = read_text("/proc/self/cgroup");
    const std::string mountinfo = read_text("/proc/self/mountinfo");
    const auto v2 = find_cgroup_mount(mountinfo, true, "");
    const auto v2_path = cgroup_path(cgroups, "");
    if (v2 && v2_path)
        for (const auto& d : cgroup_dirs(*v2, *v2_path))
            tighten(b, parse_cpu_max(read_text(d / "cpu.max")), d / "cpu.max");
    const auto v1 = find_cgroup_mount(mountinfo, false, "cpu");
    const auto v1_path = cgroup_path(cgroups, "cpu");
    if (v1 && v1_path)
        for (const auto& d : cgroup_dirs(*v1, *v1_path))
            tighten(b, parse_cfs_quota(read_text(d / "cpu.cfs_quota_us"), read_text(d / "cpu.cfs_period_us")),
                    d / "cpu.cfs_quota_us");
    return b;
}

int default_cpu_threads() {
    static const int n = read_cpu_budget().threads();
    return n;
}

}  // namespace llmt
