#include "server/jobs/job_events.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>

namespace llmt::server {

namespace {

std::string duration_text(double s) {
    if (!std::isfinite(s) || s < 0) return "?";
    const auto t = static_cast<int64_t>(std::llround(s));
    if (t < 60) return fmt::format("{}s", t);
    if (t < 3600) return fmt::format("{}m{:02}s", t / 60, t % 60);
    return fmt::format("{}h{:02}m{:02}s", t / 3600, (t % 3600) / 60, t % 60);
}

void emit(const std::string& line) {
    fmt::print(stderr, "llmtrain serve: {}\n", line);
    std::fflush(stderr);
}

}  // namespace

void log_job_queued(int64_t job_id, const std::string& submitted_by, const std::string& run_name) {
    emit(fmt::format("job {} queued ({}, by {})", job_id, run_name, submitted_by));
}

void log_job_started(int64_t job_id, int attempt) {
    emit(fmt::format("job {} started (attempt {})", job_id, attempt));
}

void log_job_finished(int64_t job_id, const std::string& state, std::optional<int> exit_code, double seconds,
                      const std::string& reason) {
    const std::string code = exit_code ? fmt::format("exit code {}", *exit_code) : std::string();
    std::string what = code.empty() ? reason : (reason == code || reason.empty() ? code : code + " (" + reason + ")");
    emit(fmt::format("job {} {}: {}{}", job_id, state, what,
                     seconds > 0 ? " after " + duration_text(seconds) : std::string()));
}

void log_job_note(int64_t job_id, const std::string& what) { emit(fmt::format("job {} {}", job_id, what)); }

}  // namespace llmt::server
