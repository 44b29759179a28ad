// JobStore on SQLite: WAL journal, synchronous=FULL (a commit survives a crash of the process and of
// the machine), busy timeout, and migrations recorded in schema_migrations (one row per version).
#include "server/jobs/store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <thread>

#include "core/error.h"
#include "server/jobs/store_sql.h"

namespace llmt::server {

namespace fs = std::filesystem;
using store_sql::Connection;
using store_sql::Stmt;
using store_sql::Txn;

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
    // 4: a submitter's waiting jobs counted at submit (their queue quota) without a scan of the table.
    R"(CREATE INDEX jobs_submitter_state ON jobs(submitted_by, state);)",
    // 5: why the server stopped a running job itself (a disk quota), so the reason survives a restart.
    R"(ALTER TABLE jobs ADD COLUMN stop_reason TEXT NOT NULL DEFAULT '';)",
};
static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == JobStore::kSchemaVersion);

const char* kJobColumns =
    "id, name, state, spec_json, config_yaml, estimate_json, submitted_by, attempts, created_at, started_at, "
    "finished_at, handle, exit_code, reason, cancel_requested, term_sent_at, timed_out, stop_reason";
// The same for list views: the config and the spec's config, overrides and command replaced by empty
// values inside SQLite, so their megabytes are never copied out or parsed.
const char* kListColumns =
    "id, name, state, json_set(json_remove(spec_json, '$.command'), '$.config', '', '$.overrides', json('{}')), "
    "'', estimate_json, submitted_by, attempts, created_at, started_at, "
    "finished_at, handle, exit_code, reason, cancel_requested, term_sent_at, timed_out, stop_reason";

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
    s.resume_from = j.value("resume_from", int64_t{0});
    if (j.contains("command")) s.command = j.at("command").get<std::vector<std::string>>();
    if (j.contains("image")) s.image = j.at("image").get<std::string>();
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
    r.stop_reason = st.text(17);
    return r;
}

}  // namespace

namespace {

// Opens `path` (created by the caller) as one connection of the store.
std::unique_ptr<Connection> open_connection(const fs::path& path) {
    auto c = std::make_unique<Connection>();
    if (sqlite3_open_v2(path.c_str(), &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX, nullptr) != SQLITE_OK) {
        std::string m = c->db ? sqlite3_errmsg(c->db) : "out of memory";
        throw IoError("job store: cannot open " + path.string() + ": " + m);
    }
    sqlite3_busy_timeout(c->db, 10000);
    return c;
}

std::vector<JobRecord> query_jobs(Connection& c, const std::string& where, const std::vector<std::string>& args,
                                  const std::string& tail, const char* columns = kJobColumns) {
    Stmt st(c, std::string("SELECT ") + columns + " FROM jobs " + where + " " + tail);
    for (size_t i = 0; i < args.size(); ++i) st.bind(static_cast<int>(i + 1), args[i]);
    std::vector<JobRecord> out;
    while (st.step()) out.push_back(row_to_job(st));
    return out;
}

// A read connection held for one call: a free one if any, else the one this thread maps to, waited
// for. A list being built on one does not hold up a key lookup on another.
class ReadLease {
public:
    explicit ReadLease(const std::vector<std::unique_ptr<Connection>>& pool) {
        for (const auto& c : pool) {
            if (c->mu.try_lock()) {
                conn_ = c.get();
                return;
            }
        }
        conn_ = pool[std::hash<std::thread::id>{}(std::this_thread::get_id()) % pool.size()].get();
        conn_->mu.lock();
    }
    ~ReadLease() { conn_->mu.unlock(); }
    ReadLease(const ReadLease&) = delete;
    ReadLease& operator=(const ReadLease&) = delete;
    Connection& operator*() const { return *conn_; }

private:
    Connection* conn_ = nullptr;
};

int attempts_of(Connection& c, int64_t id) {
    Stmt a(c, "SELECT attempts FROM jobs WHERE id = ?");
    a.bind(1, id);
    return a.step() ? static_cast<int>(a.i64(0)) : 0;
}

}  // namespace

JobStore::JobStore(const fs::path& path) {
    // Create the file owner-only before SQLite opens it; SQLite gives the -wal/-shm files the same mode.
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) throw IoError("job store: cannot open " + path.string() + ": " + std::strerror(errno));
    ::fchmod(fd, 0600);
    ::close(fd);
    write_ = open_connection(path);
    write_->exec("PRAGMA journal_mode=WAL");
    write_->exec("PRAGMA synchronous=FULL");
    write_->exec("PRAGMA foreign_keys=ON");
    migrate();
    // After the migrations: they read the current schema.
    for (int i = 0; i < kReadConnections; ++i) readers_.push_back(open_connection(path));
}

JobStore::~JobStore() = default;

void JobStore::migrate() {
    std::lock_guard lock(write_->mu);
    Connection& c = *write_;
    c.exec("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)");
    Txn txn(c);
    int have = 0;
    {
        Stmt st(c, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations");
        if (st.step()) have = static_cast<int>(st.i64(0));
    }
    if (have > kSchemaVersion)
        throw IoError("job store: database schema version " + std::to_string(have) +
                      " is newer than this llmtrain's (" + std::to_string(kSchemaVersion) + ")");
    for (int v = have + 1; v <= kSchemaVersion; ++v) {
        c.exec(kMigrations[v - 1]);
        Stmt st(c, "INSERT INTO schema_migrations(version, applied_at) VALUES (?, ?)");
        st.bind(1, v).bind(2, unix_now()).step();
    }
    txn.commit();
}

int JobStore::schema_version() {
    ReadLease lease(readers_);
    Stmt st(*lease, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations");
    return st.step() ? static_cast<int>(st.i64(0)) : 0;
}

int64_t JobStore::insert(const JobRecord& r, const std::optional<IdempotencyKey>& idem) {
    const SubmitResult res = submit(Submission{r, idem, {}, 0});
    if (res.kind != SubmitResult::Kind::kCreated)
        throw IoError("job store: Idempotency-Key '" + (idem ? idem->key : std::string()) + "' of " + r.submitted_by +
                      " was already used (job " + std::to_string(res.job_id) + ")");
    return res.job_id;
}

std::optional<IdempotentSubmission> JobStore::find_idempotent(const std::string& principal, const std::string& key) {
    ReadLease lease(readers_);
    Stmt st(*lease, store_sql::kFindIdempotentSql);
    st.bind(1, principal).bind(2, key);
    if (!st.step()) return std::nullopt;
    return IdempotentSubmission{st.i64(0), st.text(1)};
}

std::optional<JobRecord> JobStore::get(int64_t id) {
    ReadLease lease(readers_);
    auto v = query_jobs(*lease, "WHERE id = ?", {std::to_string(id)}, "");
    if (v.empty()) return std::nullopt;
    return v.front();
}

namespace {

// The WHERE of a list query's filters (state, label), with their arguments appended to `args`.
std::string list_filter(const ListQuery& q, std::vector<std::string>& args) {
    std::string where;
    if (q.state) {
        where += " AND state = ?";
        args.push_back(state_name(*q.state));
    }
    if (q.label) {
        where += " AND id IN (SELECT job_id FROM job_labels WHERE key = ? AND value = ?)";
        args.push_back(q.label->first);
        args.push_back(q.label->second);
    }
    return where;
}

}  // namespace

std::vector<JobRecord> JobStore::list(const ListQuery& q) {
    std::vector<std::string> args;
    std::string where;
    if (q.newest_first) {
        where = q.before_id > 0 ? "WHERE id < ?" : "WHERE 1";
        if (q.before_id > 0) args.push_back(std::to_string(q.before_id));
    } else {
        where = "WHERE id > ?";
        args.push_back(std::to_string(q.after_id));
    }
    where += list_filter(q, args);
    // The limit is bound, not written into the SQL: each connection keeps a prepared statement per SQL
    // text (tens of KB each), so a text per client-chosen limit would grow them by the request.
    args.push_back(std::to_string(q.limit));
    ReadLease lease(readers_);
    return query_jobs(*lease, where, args, q.newest_first ? "ORDER BY id DESC LIMIT ?" : "ORDER BY id LIMIT ?",
                      kListColumns);
}

int64_t JobStore::count(const ListQuery& q) {
    std::vector<std::string> args;
    const std::string where = "WHERE 1" + list_filter(q, args);
    ReadLease lease(readers_);
    Stmt st(*lease, "SELECT COUNT(*) FROM jobs " + where);
    for (size_t i = 0; i < args.size(); ++i) st.bind(static_cast<int>(i + 1), args[i]);
    return st.step() ? st.i64(0) : 0;
}

std::vector<int64_t> JobStore::waiting_ids() {
    ReadLease lease(readers_);
    Stmt st(*lease, "SELECT id FROM jobs WHERE state IN ('queued', 'retrying') ORDER BY priority DESC, id ASC");
    std::vector<int64_t> out;
    while (st.step()) out.push_back(st.i64(0));
    return out;
}

std::vector<JobEvent> JobStore::history(int64_t id) {
    ReadLease lease(readers_);
    Stmt st(*lease, "SELECT at, state, attempt, detail FROM job_events WHERE job_id = ? ORDER BY seq");
    st.bind(1, id);
    std::vector<JobEvent> out;
    while (st.step()) out.push_back({st.f64(0), st.text(1), static_cast<int>(st.i64(2)), st.text(3)});
    return out;
}

std::vector<JobRecord> JobStore::waiting() {
    ReadLease lease(readers_);
    return query_jobs(*lease, "WHERE state IN ('queued', 'retrying')", {}, "ORDER BY priority DESC, id ASC");
}

std::vector<JobRecord> JobStore::in_state(JobState s) {
    ReadLease lease(readers_);
    return query_jobs(*lease, "WHERE state = ?", {state_name(s)}, "ORDER BY id");
}

bool JobStore::transition(int64_t id, JobState from, JobState to, const JobUpdate& u) {
    std::string sql = "UPDATE jobs SET state = ?";
    if (u.start_attempt)
        sql += ", attempts = attempts + 1, started_at = ?, exit_code = NULL, handle = '', term_sent_at = 0, "
               "stop_reason = ''";
    if (u.handle) sql += ", handle = ?";
    if (u.exit_code) sql += ", exit_code = ?";
    if (u.reason) sql += ", reason = ?";
    if (u.finish) sql += ", finished_at = ?";
    sql += " WHERE id = ? AND state = ?";
    std::lock_guard lock(write_->mu);
    Connection& c = *write_;
    Txn txn(c);
    {
        Stmt st(c, sql);
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
    }
    if (sqlite3_changes(c.db) != 1) return false;
    store_sql::add_event(c, id, state_name(to), attempts_of(c, id), u.detail, unix_now());
    txn.commit();
    generation_.fetch_add(1);
    return true;
}

void JobStore::set_handle(int64_t id, const std::string& handle) {
    std::lock_guard lock(write_->mu);
    Stmt st(*write_, "UPDATE jobs SET handle = ? WHERE id = ?");
    st.bind(1, handle).bind(2, id).step();
}

bool JobStore::request_cancel(int64_t id) {
    std::lock_guard lock(write_->mu);
    Connection& c = *write_;
    Txn txn(c);
    {
        Stmt st(c, "UPDATE jobs SET cancel_requested = 1 WHERE id = ? AND state = 'running' AND cancel_requested = 0");
        st.bind(1, id).step();
    }
    const bool changed = sqlite3_changes(c.db) == 1;
    if (changed) store_sql::add_event(c, id, "running", attempts_of(c, id), "cancel requested", unix_now());
    txn.commit();
    return changed;
}

void JobStore::note(int64_t id, const std::string& detail) {
    std::lock_guard lock(write_->mu);
    Connection& c = *write_;
    Txn txn(c);
    std::string state;
    int attempts = 0;
    {
        Stmt a(c, "SELECT state, attempts FROM jobs WHERE id = ?");
        a.bind(1, id);
        if (!a.step()) return;
        state = a.text(0);
        attempts = static_cast<int>(a.i64(1));
    }
    store_sql::add_event(c, id, state, attempts, detail, unix_now());
    txn.commit();
}

void JobStore::mark_term_sent(int64_t id, double at, bool timed_out) {
    std::lock_guard lock(write_->mu);
    Stmt st(*write_, "UPDATE jobs SET term_sent_at = ?, timed_out = MAX(timed_out, ?) WHERE id = ?");
    st.bind(1, at).bind(2, timed_out ? 1 : 0).bind(3, id).step();
}

void JobStore::mark_stopped(int64_t id, double at, const std::string& reason) {
    std::lock_guard lock(write_->mu);
    Stmt st(*write_, "UPDATE jobs SET term_sent_at = ?, stop_reason = ? WHERE id = ? AND state = 'running'");
    st.bind(1, at).bind(2, reason).bind(3, id).step();
}

std::map<std::string, int64_t> JobStore::count_by_state() {
    std::map<std::string, int64_t> out;
    for (JobState s : {JobState::kQueued, JobState::kRunning, JobState::kRetrying, JobState::kSucceeded,
                       JobState::kFailed, JobState::kCancelled})
        out[state_name(s)] = 0;
    ReadLease lease(readers_);
    Stmt st(*lease, "SELECT state, COUNT(*) FROM jobs GROUP BY state");
    while (st.step()) out[st.text(0)] = st.i64(1);
    return out;
}

double JobStore::label_committed_usd(const std::string& key, const std::string& value) {
    ReadLease lease(readers_);
    return store_sql::label_committed_usd(*lease, key, value);
}

std::vector<std::string> JobStore::check_consistency() {
    ReadLease lease(readers_);
    Connection& c = *lease;
    std::vector<std::string> problems;
    {
        Stmt st(c, "PRAGMA integrity_check");
        if (st.step() && st.text(0) != "ok") problems.push_back("integrity_check: " + st.text(0));
    }
    Stmt st(c,
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
