// JobStore on SQLite: WAL journal, synchronous=FULL (a commit survives a crash of the process and of
// the machine), busy timeout, and migrations recorded in schema_migrations (one row per version).
#include "server/store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "core/error.h"

namespace llmt::server {

namespace fs = std::filesystem;

double unix_now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

namespace {

// Migrations in order; index + 1 is the version. Never edit a shipped entry: append a new one.
const char* const kMigrations[] = {
    // 1: jobs, their labels and state history.
    R"(CREATE TABLE jobs (
         id INTEGER PRIMARY KEY AUTOINCREMENT,
         name TEXT NOT NULL,
         state TEXT NOT NULL,
         priority INTEGER NOT NULL,
         spec_json TEXT NOT NULL,
         config_yaml TEXT NOT NULL,
         estimate_json TEXT NOT NULL,
         submitted_by TEXT NOT NULL,
         attempts INTEGER NOT NULL DEFAULT 0,
         created_at REAL NOT NULL,
         started_at REAL NOT NULL DEFAULT 0,
         finished_at REAL NOT NULL DEFAULT 0,
         handle TEXT NOT NULL DEFAULT '',
         exit_code INTEGER,
         reason TEXT NOT NULL DEFAULT '',
         cancel_requested INTEGER NOT NULL DEFAULT 0);
       CREATE TABLE job_labels (job_id INTEGER NOT NULL REFERENCES jobs(id), key TEXT NOT NULL, value TEXT NOT NULL,
                                PRIMARY KEY (job_id, key));
       CREATE INDEX job_labels_kv ON job_labels(key, value);
       CREATE TABLE job_events (job_id INTEGER NOT NULL REFERENCES jobs(id), seq INTEGER PRIMARY KEY AUTOINCREMENT,
                                at REAL NOT NULL, state TEXT NOT NULL, attempt INTEGER NOT NULL, detail TEXT NOT NULL);
       CREATE INDEX job_events_job ON job_events(job_id, seq);
       CREATE INDEX jobs_admission ON jobs(state, priority DESC, id);)",
    // 2: when SIGTERM went out (cancel or max_runtime_s), so the SIGKILL grace survives a restart.
    R"(ALTER TABLE jobs ADD COLUMN term_sent_at REAL NOT NULL DEFAULT 0;
       ALTER TABLE jobs ADD COLUMN timed_out INTEGER NOT NULL DEFAULT 0;)",
    // 3: Idempotency-Key of POST /v1/jobs: a retried submission returns the job its key first created.
    R"(CREATE TABLE idempotency_keys (principal TEXT NOT NULL, key TEXT NOT NULL, request TEXT NOT NULL,
                                      job_id INTEGER NOT NULL REFERENCES jobs(id), created_at REAL NOT NULL,
                                      PRIMARY KEY (principal, key));)",
};
static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == JobStore::kSchemaVersion);

// A prepared statement with positional binds; finalized on destruction.
class Stmt {
public:
    Stmt(sqlite3* db, const std::string& sql) : db_(db) {
        if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st_, nullptr) != SQLITE_OK)
            throw IoError(std::string("job store: cannot prepare statement: ") + sqlite3_errmsg(db));
    }
    ~Stmt() { sqlite3_finalize(st_); }
    Stmt& bind(int i, int64_t v) { return check(sqlite3_bind_int64(st_, i, v)); }
    Stmt& bind(int i, int v) { return check(sqlite3_bind_int64(st_, i, v)); }
    Stmt& bind(int i, double v) { return check(sqlite3_bind_double(st_, i, v)); }
    Stmt& bind(int i, const std::string& v) {
        return check(sqlite3_bind_text(st_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
    }
    Stmt& bind_null(int i) { return check(sqlite3_bind_null(st_, i)); }
    // True while there is a row.
    bool step() {
        int rc = sqlite3_step(st_);
        if (rc == SQLITE_ROW) return true;
        if (rc == SQLITE_DONE) return false;
        throw IoError(std::string("job store: ") + sqlite3_errmsg(db_));
    }
    int64_t i64(int c) { return sqlite3_column_int64(st_, c); }
    double f64(int c) { return sqlite3_column_double(st_, c); }
    bool is_null(int c) { return sqlite3_column_type(st_, c) == SQLITE_NULL; }
    std::string text(int c) {
        auto p = sqlite3_column_text(st_, c);
        return p ? std::string(reinterpret_cast<const char*>(p), sqlite3_column_bytes(st_, c)) : std::string();
    }

private:
    Stmt& check(int rc) {
        if (rc != SQLITE_OK) throw IoError(std::string("job store: bind failed: ") + sqlite3_errmsg(db_));
        return *this;
    }
    sqlite3* db_;
    sqlite3_stmt* st_ = nullptr;
};

// BEGIN IMMEDIATE ... COMMIT, rolled back when an exception leaves the scope.
class Txn {
public:
    explicit Txn(sqlite3* db) : db_(db) { run("BEGIN IMMEDIATE"); }
    ~Txn() {
        if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    }
    void commit() {
        run("COMMIT");
        done_ = true;
    }

private:
    void run(const char* sql) {
        char* err = nullptr;
        if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
            std::string m = err ? err : "?";
            sqlite3_free(err);
            throw IoError(std::string("job store: ") + sql + ": " + m);
        }
    }
    sqlite3* db_;
    bool done_ = false;
};

const char* kJobColumns =
    "id, name, state, spec_json, config_yaml, estimate_json, submitted_by, attempts, created_at, started_at, "
    "finished_at, handle, exit_code, reason, cancel_requested, term_sent_at, timed_out";

JobSpec spec_from_json(const nlohmann::json& j) {
    JobSpec s;
    s.name = j.at("name");
    s.config_input = j.at("config");
    s.overrides = j.at("overrides").get<std::map<std::string, std::string>>();
    s.nodes = j.at("nodes");
    s.nproc_per_node = j.at("nproc_per_node");
    s.gpus_per_node = j.at("gpus_per_node");
    s.priority = j.at("priority");
    s.max_runtime_s = j.at("max_runtime_s");
    s.budget_usd = j.at("budget_usd");
    s.max_retries = j.at("max_retries");
    s.labels = j.at("labels").get<std::map<std::string, std::string>>();
    return s;
}

JobRecord row_to_job(Stmt& st) {
    JobRecord r;
    r.id = st.i64(0);
    r.state = parse_state(st.text(2)).value_or(JobState::kFailed);
    r.spec = spec_from_json(nlohmann::json::parse(st.text(3)));
    r.config_yaml = st.text(4);
    r.estimate = nlohmann::json::parse(st.text(5));
    r.submitted_by = st.text(6);
    r.attempts = static_cast<int>(st.i64(7));
    r.created_at = st.f64(8);
    r.started_at = st.f64(9);
    r.finished_at = st.f64(10);
    r.handle = st.text(11);
    if (!st.is_null(12)) r.exit_code = static_cast<int>(st.i64(12));
    r.reason = st.text(13);
    r.cancel_requested = st.i64(14) != 0;
    r.term_sent_at = st.f64(15);
    r.timed_out = st.i64(16) != 0;
    return r;
}

}  // namespace

JobStore::JobStore(const fs::path& path) {
    // Create the file owner-only before SQLite opens it; SQLite gives the -wal/-shm files the same mode.
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) throw IoError("job store: cannot open " + path.string() + ": " + std::strerror(errno));
    ::fchmod(fd, 0600);
    ::close(fd);
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX, nullptr) != SQLITE_OK) {
        std::string m = db_ ? sqlite3_errmsg(db_) : "out of memory";
        sqlite3_close(db_);
        throw IoError("job store: cannot open " + path.string() + ": " + m);
    }
    sqlite3_busy_timeout(db_, 10000);
    exec("PRAGMA journal_mode=WAL");
    exec("PRAGMA synchronous=FULL");
    exec("PRAGMA foreign_keys=ON");
    migrate();
}

JobStore::~JobStore() { sqlite3_close(db_); }

void JobStore::exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
        std::string m = err ? err : "?";
        sqlite3_free(err);
        throw IoError(std::string("job store: ") + m + " in: " + sql);
    }
}

void JobStore::migrate() {
    std::lock_guard lock(mu_);
    exec("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)");
    Txn txn(db_);
    int have = 0;
    {
        Stmt st(db_, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations");
        if (st.step()) have = static_cast<int>(st.i64(0));
    }
    if (have > kSchemaVersion)
        throw IoError("job store: database schema version " + std::to_string(have) +
                      " is newer than this llmtrain's (" + std::to_string(kSchemaVersion) + ")");
    for (int v = have + 1; v <= kSchemaVersion; ++v) {
        exec(kMigrations[v - 1]);
        Stmt st(db_, "INSERT INTO schema_migrations(version, applied_at) VALUES (?, ?)");
        st.bind(1, v).bind(2, unix_now()).step();
    }
    txn.commit();
}

int JobStore::schema_version() {
    std::lock_guard lock(mu_);
    Stmt st(db_, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations");
    return st.step() ? static_cast<int>(st.i64(0)) : 0;
}

void JobStore::add_event(int64_t id, const std::string& state, int attempt, const std::string& detail) {
    Stmt st(db_, "INSERT INTO job_events(job_id, at, state, attempt, detail) VALUES (?, ?, ?, ?, ?)");
    st.bind(1, id).bind(2, unix_now()).bind(3, state).bind(4, attempt).bind(5, detail).step();
}

int64_t JobStore::insert(const JobRecord& r, const std::optional<IdempotencyKey>& idem) {
    std::lock_guard lock(mu_);
    Txn txn(db_);
    Stmt st(db_,
            "INSERT INTO jobs(name, state, priority, spec_json, config_yaml, estimate_json, submitted_by, created_at) "
            "VALUES (?, 'queued', ?, ?, ?, ?, ?, ?)");
    st.bind(1, r.spec.name).bind(2, r.spec.priority).bind(3, r.spec.to_json().dump()).bind(4, r.config_yaml);
    st.bind(5, r.estimate.dump()).bind(6, r.submitted_by).bind(7, unix_now()).step();
    int64_t id = sqlite3_last_insert_rowid(db_);
    for (const auto& [k, v] : r.spec.labels) {
        Stmt l(db_, "INSERT INTO job_labels(job_id, key, value) VALUES (?, ?, ?)");
        l.bind(1, id).bind(2, k).bind(3, v).step();
    }
    add_event(id, "queued", 0, "submitted by " + r.submitted_by);
    if (idem) {
        Stmt k(db_, "INSERT INTO idempotency_keys(principal, key, request, job_id, created_at) VALUES (?, ?, ?, ?, ?)");
        k.bind(1, r.submitted_by).bind(2, idem->key).bind(3, idem->request).bind(4, id).bind(5, unix_now()).step();
    }
    txn.commit();
    return id;
}

std::optional<IdempotentSubmission> JobStore::find_idempotent(const std::string& principal, const std::string& key) {
    std::lock_guard lock(mu_);
    Stmt st(db_, "SELECT job_id, request FROM idempotency_keys WHERE principal = ? AND key = ?");
    st.bind(1, principal).bind(2, key);
    if (!st.step()) return std::nullopt;
    return IdempotentSubmission{st.i64(0), st.text(1)};
}

std::vector<JobRecord> JobStore::query_jobs(const std::string& where, const std::vector<std::string>& args,
                                            const std::string& tail) {
    Stmt st(db_, std::string("SELECT ") + kJobColumns + " FROM jobs " + where + " " + tail);
    for (size_t i = 0; i < args.size(); ++i) st.bind(static_cast<int>(i + 1), args[i]);
    std::vector<JobRecord> out;
    while (st.step()) out.push_back(row_to_job(st));
    return out;
}

std::optional<JobRecord> JobStore::get(int64_t id) {
    std::lock_guard lock(mu_);
    auto v = query_jobs("WHERE id = ?", {std::to_string(id)}, "");
    if (v.empty()) return std::nullopt;
    return v.front();
}

std::vector<JobRecord> JobStore::list(const ListQuery& q) {
    std::lock_guard lock(mu_);
    std::string where = "WHERE id > ?";
    std::vector<std::string> args = {std::to_string(q.after_id)};
    if (q.state) {
        where += " AND state = ?";
        args.push_back(state_name(*q.state));
    }
    if (q.label) {
        where += " AND id IN (SELECT job_id FROM job_labels WHERE key = ? AND value = ?)";
        args.push_back(q.label->first);
        args.push_back(q.label->second);
    }
    return query_jobs(where, args, "ORDER BY id LIMIT " + std::to_string(q.limit));
}

std::vector<JobEvent> JobStore::history(int64_t id) {
    std::lock_guard lock(mu_);
    Stmt st(db_, "SELECT at, state, attempt, detail FROM job_events WHERE job_id = ? ORDER BY seq");
    st.bind(1, id);
    std::vector<JobEvent> out;
    while (st.step()) out.push_back({st.f64(0), st.text(1), static_cast<int>(st.i64(2)), st.text(3)});
    return out;
}

std::vector<JobRecord> JobStore::waiting() {
    std::lock_guard lock(mu_);
    return query_jobs("WHERE state IN ('queued', 'retrying')", {}, "ORDER BY priority DESC, id ASC");
}

std::vector<JobRecord> JobStore::in_state(JobState s) {
    std::lock_guard lock(mu_);
    return query_jobs("WHERE state = ?", {state_name(s)}, "ORDER BY id");
}

bool JobStore::transition(int64_t id, JobState from, JobState to, const JobUpdate& u) {
    std::lock_guard lock(mu_);
    Txn txn(db_);
    std::string sql = "UPDATE jobs SET state = ?";
    std::vector<std::string> extra;
    if (u.start_attempt)
        sql += ", attempts = attempts + 1, started_at = ?, exit_code = NULL, handle = '', term_sent_at = 0";
    if (u.handle) sql += ", handle = ?";
    if (u.exit_code) sql += ", exit_code = ?";
    if (u.reason) sql += ", reason = ?";
    if (u.finish) sql += ", finished_at = ?";
    sql += " WHERE id = ? AND state = ?";
    Stmt st(db_, sql);
    int i = 1;
    double now = unix_now();
    st.bind(i++, std::string(state_name(to)));
    if (u.start_attempt) st.bind(i++, now);
    if (u.handle) st.bind(i++, *u.handle);
    if (u.exit_code) st.bind(i++, *u.exit_code);
    if (u.reason) st.bind(i++, *u.reason);
    if (u.finish) st.bind(i++, now);
    st.bind(i, id);
    st.bind(i + 1, std::string(state_name(from)));
    st.step();
    if (sqlite3_changes(db_) != 1) return false;
    int attempts = 0;
    {
        Stmt a(db_, "SELECT attempts FROM jobs WHERE id = ?");
        a.bind(1, id);
        if (a.step()) attempts = static_cast<int>(a.i64(0));
    }
    add_event(id, state_name(to), attempts, u.detail);
    txn.commit();
    return true;
}

void JobStore::set_handle(int64_t id, const std::string& handle) {
    std::lock_guard lock(mu_);
    Stmt st(db_, "UPDATE jobs SET handle = ? WHERE id = ?");
    st.bind(1, handle).bind(2, id).step();
}

bool JobStore::request_cancel(int64_t id) {
    std::lock_guard lock(mu_);
    Txn txn(db_);
    Stmt st(db_, "UPDATE jobs SET cancel_requested = 1 WHERE id = ? AND state = 'running' AND cancel_requested = 0");
    st.bind(1, id).step();
    bool changed = sqlite3_changes(db_) == 1;
    if (changed) {
        Stmt a(db_, "SELECT attempts FROM jobs WHERE id = ?");
        a.bind(1, id);
        int attempts = a.step() ? static_cast<int>(a.i64(0)) : 0;
        add_event(id, "running", attempts, "cancel requested");
    }
    txn.commit();
    return changed;
}

void JobStore::note(int64_t id, const std::string& detail) {
    std::lock_guard lock(mu_);
    Txn txn(db_);
    Stmt a(db_, "SELECT state, attempts FROM jobs WHERE id = ?");
    a.bind(1, id);
    if (!a.step()) return;
    add_event(id, a.text(0), static_cast<int>(a.i64(1)), detail);
    txn.commit();
}

void JobStore::mark_term_sent(int64_t id, double at, bool timed_out) {
    std::lock_guard lock(mu_);
    Stmt st(db_, "UPDATE jobs SET term_sent_at = ?, timed_out = MAX(timed_out, ?) WHERE id = ?");
    st.bind(1, at).bind(2, timed_out ? 1 : 0).bind(3, id).step();
}

std::map<std::string, int64_t> JobStore::count_by_state() {
    std::lock_guard lock(mu_);
    std::map<std::string, int64_t> out;
    for (JobState s : {JobState::kQueued, JobState::kRunning, JobState::kRetrying, JobState::kSucceeded,
                       JobState::kFailed, JobState::kCancelled})
        out[state_name(s)] = 0;
    Stmt st(db_, "SELECT state, COUNT(*) FROM jobs GROUP BY state");
    while (st.step()) out[st.text(0)] = st.i64(1);
    return out;
}

double JobStore::label_committed_usd(const std::string& key, const std::string& value) {
    std::lock_guard lock(mu_);
    // A job cancelled before its first attempt spent nothing and does not count.
    Stmt st(db_,
            "SELECT COALESCE(SUM(json_extract(estimate_json, '$.cost_usd')), 0) FROM jobs "
            "WHERE id IN (SELECT job_id FROM job_labels WHERE key = ? AND value = ?) "
            "AND NOT (state = 'cancelled' AND attempts = 0)");
    st.bind(1, key).bind(2, value);
    return st.step() ? st.f64(0) : 0.0;
}

std::vector<std::string> JobStore::check_consistency() {
    std::lock_guard lock(mu_);
    std::vector<std::string> problems;
    {
        Stmt st(db_, "PRAGMA integrity_check");
        if (st.step() && st.text(0) != "ok") problems.push_back("integrity_check: " + st.text(0));
    }
    Stmt st(db_,
            "SELECT j.id, j.state, j.attempts, "
            " (SELECT e.state FROM job_events e WHERE e.job_id = j.id ORDER BY e.seq DESC LIMIT 1), "
            " (SELECT COUNT(*) FROM job_events e WHERE e.job_id = j.id AND e.detail LIKE 'attempt % started%') "
            "FROM jobs j");
    while (st.step()) {
        int64_t id = st.i64(0);
        if (st.is_null(3)) {
            problems.push_back("job " + std::to_string(id) + " has no history");
            continue;
        }
        if (st.text(3) != st.text(1))
            problems.push_back("job " + std::to_string(id) + " is " + st.text(1) + " but its history ends in " +
                               st.text(3));
        if (st.i64(4) != st.i64(2))
            problems.push_back("job " + std::to_string(id) + " has attempts=" + std::to_string(st.i64(2)) + " but " +
                               std::to_string(st.i64(4)) + " starts in its history");
    }
    return problems;
}

}  // namespace llmt::server
