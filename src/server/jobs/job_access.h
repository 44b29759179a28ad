// What a server-side job may touch (docs/security.md). Checked when a job is submitted (a violation is
// a 400 naming the key, before anything runs) and again when each attempt starts:
// - read-class config values (config/schema.h Access::kRead: data sets, tokenizers, models) resolve
//   under one of the read roots (the presets' data directories and `serve --allow-read`) and never
//   under a denied path (the server's own data dir, tokens file and database), whatever the roots are;
//   a value in a Hugging Face hub cache (core/hub_cache.h) has every snapshot link inside its folder;
// - write-class values are relative paths the server places inside the job's own directory;
// - endpoint-class values (URIs) start with an endpoint the operator allows.
// The rules walk the schema's classes (config/path_values.h), so a new path-valued key is covered.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/path_values.h"

namespace llmt::server {

struct JobAccessPolicy {
    std::vector<std::filesystem::path> read_roots;  // absolute; jobs read only under these
    std::vector<std::filesystem::path> denied;      // never readable, even under a read root
    // Relative read values resolve against this (the jobs' working directory); empty: they are refused
    // (pods, whose working directory is the image's).
    std::filesystem::path relative_base;
    // true: paths are this machine's, so symlinks are resolved before the check; false: another
    // machine's (pods), checked lexically with ".." refused.
    bool local = true;
    std::vector<std::string> endpoints;  // URI prefixes jobs may connect to (`serve --allow-endpoint`)
};

// Throws ApiError 400 "path_not_allowed" naming the first value outside the policy.
void check_job_access(const std::vector<config::PathValue>& values, const JobAccessPolicy& policy);
void check_job_access(const config::Config& cfg, const JobAccessPolicy& policy);

// The --set overrides that put every write-class value of `cfg` under `write_root` (the job's own
// directory as the job sees it). Call after check_job_access, which refuses values that climb out.
std::vector<std::string> job_write_overrides(const config::Config& cfg, const std::filesystem::path& write_root);

// The directories the presets in `presets_dir` read from (their read-class values' fixed parts,
// resolved against `base`): the default read roots of a server without --allow-read.
std::vector<std::filesystem::path> preset_read_roots(const std::filesystem::path& presets_dir,
                                                     const std::filesystem::path& base);

}  // namespace llmt::server
