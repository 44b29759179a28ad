// JobState names and JobSpec <-> JSON (the form stored in the job store and returned by the API).
#include "server/jobs/job.h"

namespace llmt::server {

const char* state_name(JobState s) {
    switch (s) {
        case JobState::kQueued: return "queued";
        case JobState::kRunning: return "running";
        case JobState::kRetrying: return "retrying";
        case JobState::kSucceeded: return "succeeded";
        case JobState::kFailed: return "failed";
        case JobState::kCancelled: return "cancelled";
    }
    return "?";
}

std::optional<JobState> parse_state(const std::string& s) {
    for (JobState st : {JobState::kQueued, JobState::kRunning, JobState::kRetrying, JobState::kSucceeded,
                        JobState::kFailed, JobState::kCancelled})
        if (s == state_name(st)) return st;
    return std::nullopt;
}

nlohmann::json JobSpec::to_json() const {
    nlohmann::json j = {{"name", name},
            {"config", config_input},
            {"overrides", overrides},
            {"nodes", nodes},
            {"nproc_per_node", nproc_per_node},
            {"gpus_per_node", gpus_per_node},
            {"priority", priority},
            {"max_runtime_s", max_runtime_s},
            {"budget_usd", budget_usd},
            {"max_retries", max_retries},
            {"labels", labels}};
    if (resume_from > 0) j["resume_from"] = resume_from;  // absent otherwise: the spec is a valid request body
    if (is_command()) {
        j["command"] = command;
        j["image"] = image;
    }
    return j;
}

}  // namespace llmt::server
