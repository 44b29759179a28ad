// Runs jobs on this machine. Each attempt is a process group led by a small supervisor (a forked copy
// of the server that only waits) which starts `llmtrain train --resume auto` (or `llmtrain launch
// --standalone ... -- train ...` for nproc_per_node > 1 once the binary has `launch`), appends its
// output to <job>/logs/job.log and writes the exit status to <job>/attempts/<n>/exit_code. The
// supervisor outlives a crashed server, so a restarted server re-finds the attempt by pid + process
// start time and still learns its exit status. docs/server.md "Local executor".
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "server/scheduler/executor.h"

namespace llmt::server {

// Thread-safe (no mutable state after construction).
class LocalExecutor : public Executor {
public:
    // `llmtrain_bin`: the binary to run (normally /proc/self/exe); `workdir`: the trainer's working
    // directory, against which relative paths in configs resolve (the server's own).
    // `job_env`: the names of this process's environment variables that jobs also get, beyond the
    // non-secret ones every job gets (server/jobs/job_env.h).
    LocalExecutor(std::filesystem::path llmtrain_bin, std::filesystem::path workdir,
                  std::vector<std::string> job_env = {});

    std::string name() const override { return "local"; }
    void validate(const JobSpec& spec) const override;
    std::string start(const AttemptRequest& req, const std::function<void(const std::string&)>& record) override;
    AttemptStatus poll(const std::string& handle) override;
    void stop(const std::string& handle, bool kill) override;
    std::vector<RankLog> rank_logs(const std::filesystem::path& job_dir, const JobSpec& spec) const override;
    bool jobs_see_local_files() const override { return true; }
    std::filesystem::path jobs_workdir() const override { return workdir_; }
    std::filesystem::path job_write_root(const AttemptRequest& req) const override { return req.job_dir; }

    bool has_launch() const { return has_launch_; }

private:
    std::filesystem::path bin_, workdir_;
    std::vector<std::string> job_env_;
    bool has_launch_ = false;
};

}  // namespace llmt::server
