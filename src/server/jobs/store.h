// The job store: jobs, their state history and labels in SQLite (WAL journal, a versioned
// schema-migration table). Every state change is one transaction that checks the state it leaves, so
// two writers (an API handler and the scheduler) never both win. Submissions are group-committed:
// those waiting share one transaction and one fsync. docs/server.md "Job store".
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "server/jobs/job.h"

namespace llmt::server {

namespace store_sql {
struct Connection;
}

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
    int64_t after_id = 0;   // pagination cursor: jobs with id > after_id (oldest first)
    bool newest_first = false;  // ids descending from before_id instead
    int64_t before_id = 0;  // with newest_first: jobs with id < before_id (0: from the newest)
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

// A label's budget (--quotas-file) that a submission's estimated cost must fit in.
struct LabelBudget {
    std::string key, value;
    double budget_usd = 0;
};

// A job to insert with the checks that must see every job before it: its Idempotency-Key (a retry
// returns the first job) and its labels' budgets (what earlier jobs committed, in the same order).
struct Submission {
    JobRecord record;  // spec, config_yaml, estimate, submitted_by (the principal of the key)
    std::optional<IdempotencyKey> idem;
    std::vector<LabelBudget> budgets;
    double cost_usd = 0;  // the estimate's cost, checked against `budgets`
    int max_waiting = -1;  // the submitter's quota of queued and retrying jobs (-1: none), checked first
};

struct SubmitResult {
    enum class Kind {
        kCreated,     // job_id was inserted, durably
        kReplayed,    // the key was used before with the same request: job_id is that first job
        kKeyReused,   // the key was used before with another request (job_id); nothing inserted
        kOverBudget,  // `over` has committed_usd already: the cost does not fit; nothing inserted
        kOverQueueQuota,  // the submitter has `waiting` jobs waiting, max_waiting or more; nothing inserted
    };
    Kind kind = Kind::kCreated;
    int64_t job_id = 0;
    LabelBudget over;
    double committed_usd = 0;
    int64_t waiting = 0;
};

// Thread-safe, every method atomic. Writes (inserts, transitions) on one connection, behind its mutex;
// reads on a few others (WAL: they see the last commit and never wait for a writer's fsync).
class JobStore {
public:
    static constexpr int kSchemaVersion = 5;

    // Opens or creates the database (mode 0600), applies pending migrations. Throws IoError.
    explicit JobStore(const std::filesystem::path& path);
    ~JobStore();
    JobStore(const JobStore&) = delete;
    JobStore& operator=(const JobStore&) = delete;

    int schema_version();

    // Group commit (store_submit.cpp): runs the submission's checks and inserts the queued job (its
    // labels, first history entry and key) in the transaction of every submission waiting with it,
    // in arrival order, each in its own savepoint; returns after that transaction's COMMIT (fsync), so
    // a kCreated result is durable. Throws IoError when its statements or the COMMIT failed: then
    // nothing of it is stored (the others of the batch are unaffected by its statements' failure).
    SubmitResult submit(const Submission& s);
    // Inserts a queued job through submit() without budgets; returns its id. A key the principal
    // already used fails (IoError): look first.
    int64_t insert(const JobRecord& r, const std::optional<IdempotencyKey>& idem = std::nullopt);
    // Transactions committed by submit() and the submissions they held, since the start.
    uint64_t group_commits() const;
    uint64_t group_committed() const;
    // The submission `principal` made with Idempotency-Key `key`, if any.
    std::optional<IdempotentSubmission> find_idempotent(const std::string& principal, const std::string& key);
    std::optional<JobRecord> get(int64_t id);
    // List rows carry what a list view shows: config_yaml, the spec's config, overrides and command
    // are left empty (they can be megabytes each; get() has them).
    std::vector<JobRecord> list(const ListQuery& q);
    // How many jobs match q's state and label (cursors and limit ignored).
    int64_t count(const ListQuery& q);
    // Waiting job ids in admission order (priority descending, then id): an index walk, no row parsed.
    std::vector<int64_t> waiting_ids();
    // Changes with every committed submission and transition: equal values mean no job entered or
    // left a state since (what admission depends on).
    uint64_t generation() const { return generation_.load(); }
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
    // SIGTERM sent at `at` because the server stopped the job itself (`reason`: a disk quota); the
    // attempt's end then fails the job with that reason. A new attempt clears it.
    void mark_stopped(int64_t id, double at, const std::string& reason);
    // Adds a history entry in the job's current state (re-attached after a restart, SIGTERM sent, ...).
    void note(int64_t id, const std::string& detail);

    std::map<std::string, int64_t> count_by_state();
    // Sum of estimate.cost_usd over the label's jobs that are not cancelled before they ran.
    double label_committed_usd(const std::string& key, const std::string& value);
    // Consistency check used by tests and the load tool: every job has a history whose last state is
    // its state, and attempts match the number of "running" entries. Returns the problems found.
    std::vector<std::string> check_consistency();

private:
    struct Pending;
    void migrate();
    void commit_batch(const std::vector<Pending*>& batch);

    static constexpr int kReadConnections = 4;
    std::unique_ptr<store_sql::Connection> write_;
    std::vector<std::unique_ptr<store_sql::Connection>> readers_;
    // Group commit: submissions queue here; the first one finding no commit running commits the queue.
    mutable std::mutex queue_mu_;
    std::condition_variable queue_cv_;
    std::vector<Pending*> queue_;
    bool committing_ = false;
    uint64_t commits_ = 0, committed_ = 0;
    std::atomic<uint64_t> generation_{0};
};

double unix_now();

}  // namespace llmt::server
