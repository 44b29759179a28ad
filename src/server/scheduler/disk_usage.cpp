// Directory usage without following links, and the disk limits' accounting (disk_usage.h).
#include "server/scheduler/disk_usage.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <set>
#include <utility>

namespace llmt::server {

namespace fs = std::filesystem;

DirUsage measure_dir(const fs::path& dir, uint64_t max_entries) {
    DirUsage u;
    struct stat root {};
    if (::lstat(dir.c_str(), &root) != 0) return u;
    std::set<std::pair<dev_t, ino_t>> linked;  // inodes with more than one name, counted once
    auto count = [&](const struct stat& st) {
        ++u.entries;
        if (!S_ISDIR(st.st_mode) && st.st_nlink > 1 && !linked.insert({st.st_dev, st.st_ino}).second) return;
        u.bytes += static_cast<uint64_t>(st.st_blocks) * 512;
    };
    count(root);
    if (!S_ISDIR(root.st_mode)) return u;
    std::vector<std::string> pending{dir.string()};
    while (!pending.empty()) {
        const std::string d = std::move(pending.back());
        pending.pop_back();
        DIR* h = ::opendir(d.c_str());
        if (!h) continue;  // unreadable: skipped
        while (const dirent* e = ::readdir(h)) {
            const std::string name = e->d_name;
            if (name == "." || name == "..") continue;
            if (u.entries >= max_entries) {
                u.truncated = true;
                break;
            }
            struct stat st {};
            if (::fstatat(::dirfd(h), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone meanwhile
            if (st.st_dev != root.st_dev) continue;  // a mount inside the job's directory is not its disk
            count(st);
            if (S_ISDIR(st.st_mode)) pending.push_back(d + "/" + name);
        }
        ::closedir(h);
        if (u.truncated) break;
    }
    return u;
}

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::string exceeded(uint64_t bytes, int64_t limit_mb, const std::string& whose) {
    return fmt::format("disk_quota_exceeded (used {:.1f} MB > limit {} MB for {})", static_cast<double>(bytes) / kMiB,
                       limit_mb, whose);
}

// A group of running jobs under one limit: while their total is over it, the newest one still running
// is stopped.
void stop_newest_until_under(const std::vector<const JobDiskUse*>& group, int64_t limit_mb, const std::string& whose,
                             std::map<int64_t, std::string>& stopped) {
    const uint64_t limit = static_cast<uint64_t>(limit_mb) * (1u << 20);
    uint64_t total = 0;
    for (const JobDiskUse* j : group)
        if (!stopped.count(j->id)) total += j->bytes;
    if (total <= limit) return;
    std::vector<const JobDiskUse*> newest(group.begin(), group.end());
    std::sort(newest.begin(), newest.end(), [](const JobDiskUse* a, const JobDiskUse* b) {
        return a->started_at != b->started_at ? a->started_at > b->started_at : a->id > b->id;
    });
    const uint64_t used = total;
    for (const JobDiskUse* j : newest) {
        if (total <= limit) break;
        if (stopped.count(j->id)) continue;
        stopped[j->id] = exceeded(used, limit_mb, whose);
        total -= j->bytes;
    }
}

}  // namespace

std::vector<DiskStop> jobs_over_disk_limits(const std::vector<JobDiskUse>& jobs, const Quotas& quotas,
                                            int64_t max_job_mb) {
    std::map<int64_t, std::string> stopped;
    for (const auto& j : jobs)
        if (j.truncated)
            stopped[j.id] = fmt::format("disk_quota_exceeded (more than {} files and directories in job {}'s "
                                        "directory, {:.1f} MB in those counted)",
                                        kMaxDiskEntriesPerJob, j.id, static_cast<double>(j.bytes) / kMiB);
    if (max_job_mb > 0)
        for (const auto& j : jobs)
            if (!stopped.count(j.id) && j.bytes > static_cast<uint64_t>(max_job_mb) * (1u << 20))
                stopped[j.id] = exceeded(j.bytes, max_job_mb, fmt::format("job {} (--max-job-disk-mb)", j.id));
    std::map<std::string, std::vector<const JobDiskUse*>> by_submitter, by_label;
    for (const auto& j : jobs) {
        by_submitter[j.submitter].push_back(&j);
        for (const auto& [k, v] : j.labels) by_label[k + "=" + v].push_back(&j);
    }
    for (const auto& [name, group] : by_submitter)
        if (const int64_t most = quotas.of_submitter(name).max_disk_mb; most >= 0)
            stop_newest_until_under(group, most, "submitter " + name, stopped);
    for (const auto& [label, group] : by_label)
        if (auto q = quotas.labels.find(label); q != quotas.labels.end() && q->second.max_disk_mb >= 0)
            stop_newest_until_under(group, q->second.max_disk_mb, "label " + label, stopped);
    std::vector<DiskStop> out;
    for (auto& [id, reason] : stopped) out.push_back({id, std::move(reason)});
    return out;
}

}  // namespace llmt::server
