// The environment a local job starts with. The server's own environment may hold credentials (cloud
// keys, tracking tokens, HF_TOKEN) that are the operator's, not the submitter's: a job gets only the
// variables that configure how programs run (locale, paths, threads, CUDA/NCCL, LLMTRAIN_* knobs) and
// the ones the operator names with `serve --job-env NAME`. docs/security.md.
#pragma once

#include <string>
#include <vector>

namespace llmt::server {

// True for a variable every job gets: PATH, HOME, LANG, LC_*, TZ, TMPDIR, OMP_*, OPENBLAS_*, CUDA_*,
// NCCL_*, LLMTRAIN_*, ... (the list is in job_env.cpp, with why each is there).
bool is_job_safe_env(const std::string& name);

// "NAME=value" entries of `environ` (null-terminated) that a job gets: the safe ones and `pass`
// (HOME is for the executor to set).
std::vector<std::string> job_environment(char** environ, const std::vector<std::string>& pass);

// Throws UsageError unless `name` is an environment variable name ([A-Za-z_][A-Za-z0-9_]*).
void check_env_name(const std::string& name);

}  // namespace llmt::server
