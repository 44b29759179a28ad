// Resuming a finished job as a new one (POST /v1/jobs with "resume_from": N; docs/server.md "Resuming a
// job"): the new job's run directory is seeded with job N's latest checkpoint (hard links: checkpoint
// files are never rewritten in place) and its metrics.jsonl, so its first attempt's `train --resume
// auto` continues job N's run from there in its own directory; job N's files are left as they were.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

namespace llmt::server {

struct ServerContext;
struct JobSpec;

// The step_<N> directory under run_dir/checkpoints that a resume continues from: the one the
// `latest` file names when it exists, else the highest N; nullopt when there is none.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& run_dir);

// Checks a submission's resume_from (0 = none) against the store and job N's run: ApiError 400 when
// there is no job N, 409 while job N has not ended, 422 when it has no checkpoint or when this
// server's executor does not run jobs on this host's files (the run is then not here to seed from).
void check_resume_from(ServerContext& ctx, const JobSpec& spec);

// Before an attempt of a job that resumes `source_run`: when `run_dir` has no checkpoint yet (the
// first attempt; later attempts continue their own), makes run_dir hold source_run's config.yaml and
// metrics.jsonl (copies) and its latest checkpoint (files hard-linked, copied where a link is
// impossible) with checkpoints/latest naming it. Throws IoError; throws InputError when source_run
// has no checkpoint any more.
void seed_resumed_run(const std::filesystem::path& source_run, const std::filesystem::path& run_dir);

}  // namespace llmt::server
