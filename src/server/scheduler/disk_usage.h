// What a job's files take on disk, and which running jobs are over a disk limit: the per-job default
// (`serve --max-job-disk-mb`) and the `max_disk_mb` of its submitter and of its labels
// (`--quotas-file`), each a total over the running jobs it covers. The scheduler measures and stops;
// these functions only count and decide. docs/server.md "Disk quotas".
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "server/scheduler/admission.h"

namespace llmt::server {

struct DirUsage {
    uint64_t bytes = 0;      // allocated blocks (st_blocks x 512), as du counts; each inode once
    uint64_t entries = 0;    // files, directories and links visited
    bool truncated = false;  // max_entries reached: bytes is a lower bound
};

// Walks `dir` without following symbolic links (a link counts as itself, never its target, and a
// linked directory is not entered) and without crossing onto another filesystem; hard links to one
// inode count once; entries it may not read are skipped. At most `max_entries` entries are visited.
// A missing `dir` is zero.
DirUsage measure_dir(const std::filesystem::path& dir, uint64_t max_entries);

// One running job as the disk check sees it.
struct JobDiskUse {
    int64_t id = 0;
    std::string submitter;
    std::map<std::string, std::string> labels;
    double started_at = 0;
    uint64_t bytes = 0;
    bool truncated = false;  // its directory holds more than kMaxDiskEntriesPerJob entries
};

// `serve --max-job-disk-mb`'s default: 100 GiB per job (checkpoints of a 7B model with optimizer state
// fit a few times; a runaway `save_every_steps` does not fill a disk).
inline constexpr int64_t kDefaultMaxJobDiskMb = 100 * 1024;

// The most entries one measurement visits: bounded work per check. A job directory holding more is
// stopped as over its quota (a training run writes a few hundred files; so many hide what they hold).
inline constexpr uint64_t kMaxDiskEntriesPerJob = 200'000;

// A job to stop and why ("disk_quota_exceeded (used 41.2 MB > limit 40 MB for submitter bob)").
struct DiskStop {
    int64_t id = 0;
    std::string reason;
};

// The jobs to stop so that every limit holds again: a job whose walk was truncated; a job over
// `max_job_mb` (0 = no per-job limit);
// then for each submitter and label with `max_disk_mb`, while its running jobs together are over it,
// the most recently started of them not already stopped (the oldest work is kept going). A job is
// stopped once, for the first limit it is found over. MB = 2^20 bytes.
std::vector<DiskStop> jobs_over_disk_limits(const std::vector<JobDiskUse>& jobs, const Quotas& quotas,
                                            int64_t max_job_mb);

}  // namespace llmt::server
