// A training job as the control plane sees it: the submitted spec, its state machine and its record
// in the job store (docs/server.md "States").
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace llmt::server {

// queued -> running -> succeeded | failed | cancelled; a failure that is not bad input goes to
// retrying (and back to running) while attempts remain. The three last states are final.
enum class JobState { kQueued, kRunning, kRetrying, kSucceeded, kFailed, kCancelled };

const char* state_name(JobState s);
std::optional<JobState> parse_state(const std::string& s);
inline bool is_final(JobState s) {
    return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled;
}
// Waiting for admission (queued, or retrying after a failed attempt).
inline bool is_waiting(JobState s) { return s == JobState::kQueued || s == JobState::kRetrying; }

// What POST /v1/jobs accepted, after validation. Resources are gang-admitted: all ranks or none.
struct JobSpec {
    std::string name;  // a DNS label (RFC 1123), never used as a path
    nlohmann::json config_input;            // as given: preset name, YAML string or JSON object
    std::map<std::string, std::string> overrides;  // key path -> value as --set would take it
    int nodes = 1, nproc_per_node = 1, gpus_per_node = 0;
    int priority = 0;            // higher runs first; ties in submission order
    double max_runtime_s = 0;    // 0 = unlimited; past it: SIGTERM (checkpoint), then failed
    double budget_usd = 0;       // 0 = no per-job budget
    int max_retries = 2;         // attempts = 1 + max_retries for failures that are not bad input
    std::map<std::string, std::string> labels;
    int64_t resume_from = 0;     // a final job whose latest checkpoint this one continues (job_resume.h); 0 = none
    // A command job (server/jobs/command_job.h): the program and its arguments, run under `llmtrain launch`
    // instead of our trainer; empty for a training job (then config_input is the config).
    std::vector<std::string> command;
    std::string image;  // the container image of a command job (Kubernetes executor)

    bool is_command() const { return !command.empty(); }
    int cpus() const { return nodes * nproc_per_node; }  // one CPU slot per rank
    int gpus() const { return nodes * gpus_per_node; }
    nlohmann::json to_json() const;
};

// One row of the job store.
struct JobRecord {
    int64_t id = 0;
    JobSpec spec;
    std::string config_yaml;      // the resolved config the job runs with
    nlohmann::json estimate;      // estimate_job() at submit
    std::string submitted_by;     // token name
    JobState state = JobState::kQueued;
    int attempts = 0;             // attempts started so far
    double created_at = 0, started_at = 0, finished_at = 0;  // unix seconds; 0 = not yet
    std::string handle;           // executor-specific JSON (local: pid, process start time)
    std::optional<int> exit_code;
    std::string reason;           // why it is in its state (exit code meaning, cancel, timeout)
    bool cancel_requested = false;
    double term_sent_at = 0;      // when SIGTERM went out (cancel or max_runtime_s); 0 = not sent
    bool timed_out = false;
    std::string stop_reason;      // set when the server stopped the attempt itself (disk quota); "" otherwise
};

}  // namespace llmt::server
