// Which version of a file is on disk, for caches that reparse only what changed (preset_cache.h,
// job_result.h): device, inode, size, and the modification and status-change times in nanoseconds. A
// rewrite by rename, an in-place edit and a touch each give a different version.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

namespace llmt::server {

struct FileVersion {
    uint64_t dev = 0, ino = 0, size = 0;
    int64_t mtime_ns = 0, ctime_ns = 0;
    bool operator==(const FileVersion&) const = default;
};

// The version of the regular file at `path`; nullopt when there is none (absent, unreadable, not a file).
std::optional<FileVersion> file_version(const std::filesystem::path& path);

}  // namespace llmt::server
