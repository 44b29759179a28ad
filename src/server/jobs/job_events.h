// One line on the server's own stderr per job transition (queued, started, finished with its state,
// exit code and duration), so whoever runs `llmtrain serve` in a terminal sees what the queue does.
// Never written into a job's log.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace llmt::server {

void log_job_queued(int64_t job_id, const std::string& submitted_by, const std::string& run_name);
void log_job_started(int64_t job_id, int attempt);
// `state`: state_name() of the state the job went to; `seconds`: since the attempt started (0: it never ran).
void log_job_finished(int64_t job_id, const std::string& state, std::optional<int> exit_code, double seconds,
                      const std::string& reason);

// Anything else about a job worth a line (how far its estimate was off).
void log_job_note(int64_t job_id, const std::string& what);

}  // namespace llmt::server
