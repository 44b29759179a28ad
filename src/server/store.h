// The job store: jobs, their state history and labels in SQLite (WAL journal, a versioned
// schema-migration table). Every state change is one transaction that checks the state it leaves, so
// two writers (an API handler and the scheduler) never both win. docs/server.md "Job store".
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "server/job.h"

struct sqlite3;

namespace llmt::server {

// One entry of a job's state history.
struct JobEvent {
    double at = 0;
    std::string state;
    int attempt = 0;
    std::string detail;
};

// Fields a transition may set besides the state; unset optionals leave the column alone.
struct JobUpdate {
    // attempts += 1, started_at = now, clears exit code/handle; detail must then read "attempt N started..."
    bool start_attempt = false;
    std::optional<std::string> handle;
    std::optional<int> exit_code;
    std::optional<std::string> reason;
    bool finish = false;                 // finished_at = now
    std::string detail;                  // recorded in the history entry
};

struct ListQuery {
    std::optional<JobState> state;
    std::optional<std::pair<std::string, std::string>> label;  // key, value
    int64_t after_id = 0;   // pagination cursor: jobs with id > after_id
    int limit = 50;
};

// A submission's Idempotency-Key and the request it came with (canonical JSON of the body).
struct IdempotencyKey {
    std::string key;
    std::string request;
};

// What a key created before: its job and the request that created it.
struct IdempotentSubmission {
    int64_t job_id = 0;
    std::string request;
};

// Thread-safe: one connection behind a mutex; every method is atomic.
class JobStore {
public:
    static constexpr int kSchemaVersion = 3;

    // Opens or creates the database (mode 0600), applies pending migrations. Throws IoError.
    explicit JobStore(const std::filesystem::path& path);
    ~JobStore();
    JobStore(const JobStore&) = delete;
    JobStore& operator=(const JobStore&) = delete;

    int schema_version();

    // Inserts a queued job (and its labels and first history entry, and `idem` for r.submitted_by, in the
    // same transaction); returns its id. A key the principal already used fails (IoError): look first.
    int64_t insert(const JobRecord& r, const std::optional<IdempotencyKey>& idem = std::nullopt);
    // The submission `principal` made with Idempotency-Key `key`, if any.
    std::optional<IdempotentSubmission> find_idempotent(const std::string& principal, const std::string& key);
    std::optional<JobRecord> get(int64_t id);
    std::vector<JobRecord> list(const ListQuery& q);
    std::vector<JobEvent> history(int64_t id);
    // Queued and retrying jobs in admission order: priority descending, then id (submission) ascending.
    std::vector<JobRecord> waiting();
    std::vector<JobRecord> in_state(JobState s);

    // Moves job `id` from `from` to `to` and applies `u`, atomically; false when the job was not in `from`.
    bool transition(int64_t id, JobState from, JobState to, const JobUpdate& u);
    // Records the executor handle of a running attempt (pid etc.).
    void set_handle(int64_t id, const std::string& handle);
    // Marks a running job's cancel request; false when it is not running.
    bool request_cancel(int64_t id);
    void mark_term_sent(int64_t id, double at, bool timed_out);
    // Adds a history entry in the job's current state (re-attached after a restart, SIGTERM sent, ...).
    void note(int64_t id, const std::string& detail);

    std::map<std::string, int64_t> count_by_state();
    // Sum of estimate.cost_usd over the label's jobs that are not cancelled before they ran.
    double label_committed_usd(const std::string& key, const std::string& value);
    // Consistency check used by tests and the load tool: every job has a history whose last state is
    // its state, and attempts match the number of "running" entries. Returns the problems found.
    std::vector<std::string> check_consistency();

private:
    void exec(const char* sql);
    void migrate();
    std::vector<JobRecord> query_jobs(const std::string& where, const std::vector<std::string>& args,
                                      const std::string& tail);
    void add_event(int64_t id, const std::string& state, int attempt, const std::string& detail);

    sqlite3* db_ = nullptr;
    std::mutex mu_;
};

double unix_now();

}  // namespace llmt::server
