// Where a job's processes run. The scheduler owns the job states; an executor only starts an attempt,
// reports on it, signals it and re-finds it after a server restart. Implementations: LocalExecutor
// (child process groups on this machine); a Kubernetes executor plugs in behind the same interface.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "server/jobs/job.h"

namespace llmt::server {

// Everything an attempt needs; paths are under the job's directory <data-dir>/jobs/<id>/.
struct AttemptRequest {
    int64_t job_id = 0;
    int attempt = 1;                    // 1-based
    std::filesystem::path job_dir;
    std::filesystem::path config_path;  // the resolved config.yaml the job runs with (not for a command job)
    JobSpec spec;
    std::filesystem::path run_dir;      // <job_dir>/runs/job-<id>: a command job's metrics file and outputs
};

// How an attempt stands right now.
struct AttemptStatus {
    enum Kind { kRunning, kExited, kLost } kind = kLost;
    int exit_code = 0;  // kExited: the trainer's exit status (128+signal when killed by a signal)
    std::string detail;
};

struct RankLog {
    std::filesystem::path path;
    std::string prefix;
};

class Executor {
public:
    virtual ~Executor() = default;
    virtual std::string name() const = 0;
    // Throws ApiError (400, naming the field) for a spec this executor cannot run (e.g. nodes > 1 locally).
    virtual void validate(const JobSpec& spec) const = 0;
    // Starts an attempt and returns its handle (JSON text for the job store). `record(handle)` is called
    // after the processes exist but before the trainer may begin: once it returns the handle is
    // durable, so a server crash in between leaves an attempt that never ran (retried), never an
    // unknown one. Throws IoError when the processes cannot be started.
    virtual std::string start(const AttemptRequest& req, const std::function<void(const std::string&)>& record) = 0;
    // Status of an attempt from its handle; works for attempts a previous server process started.
    virtual AttemptStatus poll(const std::string& handle) = 0;
    // Graceful stop (SIGTERM: the trainer checkpoints and exits 143) or kill (SIGKILL) of all its processes.
    virtual void stop(const std::string& handle, bool kill) = 0;
    // Where each rank's log lines are, rank order: a file, and the prefix that marks the rank's lines in
    // it ("" = every line of the file is this rank's).
    virtual std::vector<RankLog> rank_logs(const std::filesystem::path& job_dir, const JobSpec& spec) const = 0;

    // How jobs see files, for the access policy (server/jobs/job_access.h). Local: this machine's files,
    // relative paths against `jobs_workdir()`. Elsewhere (pods): `job_read_mounts()` are the read-only
    // volumes every job gets, and relative paths mean nothing the server can check.
    virtual bool jobs_see_local_files() const = 0;
    virtual std::filesystem::path jobs_workdir() const { return {}; }
    virtual std::vector<std::filesystem::path> job_read_mounts() const { return {}; }
    // The job's own directory as the job sees it: write-class config values are placed under it.
    virtual std::filesystem::path job_write_root(const AttemptRequest& req) const = 0;
};

}  // namespace llmt::server
