// Internal to the job store (store.cpp, store_submit.cpp): one SQLite connection with its prepared
// statements, a statement borrowed from it, and a transaction. Not for other files.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/error.h"

namespace llmt::server::store_sql {

// A connection and the statements prepared on it, each prepared once and reset after use. The caller
// holds `mu` for as long as it uses the connection (a statement, a transaction).
struct Connection {
    sqlite3* db = nullptr;
    std::mutex mu;
    std::unordered_map<std::string, sqlite3_stmt*> prepared;

    Connection() = default;
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;
    ~Connection() {
        for (auto& [sql, st] : prepared) sqlite3_finalize(st);
        sqlite3_close(db);
    }

    // Runs statements without results (DDL, PRAGMA, BEGIN/COMMIT). Throws IoError naming the SQL.
    void exec(const std::string& sql) {
        char* err = nullptr;
        if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
            std::string m = err ? err : sqlite3_errmsg(db);
            sqlite3_free(err);
            throw IoError("job store: " + m + " in: " + sql);
        }
    }
};

// A prepared statement of `conn` with positional binds: prepared on first use, reset and unbound when
// this goes out of scope. Two live Stmts of one SQL text would share a statement: keep one at a time.
class Stmt {
public:
    Stmt(Connection& conn, const std::string& sql) : db_(conn.db) {
        auto it = conn.prepared.find(sql);
        if (it == conn.prepared.end()) {
            sqlite3_stmt* st = nullptr;
            if (sqlite3_prepare_v3(db_, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &st, nullptr) != SQLITE_OK)
                throw IoError(std::string("job store: cannot prepare statement: ") + sqlite3_errmsg(db_));
            it = conn.prepared.emplace(sql, st).first;
        }
        st_ = it->second;
    }
    ~Stmt() {
        sqlite3_reset(st_);
        sqlite3_clear_bindings(st_);
    }
    Stmt(const Stmt&) = delete;
    Stmt& operator=(const Stmt&) = delete;

    Stmt& bind(int i, int64_t v) { return check(sqlite3_bind_int64(st_, i, v)); }
    Stmt& bind(int i, int v) { return check(sqlite3_bind_int64(st_, i, v)); }
    Stmt& bind(int i, double v) { return check(sqlite3_bind_double(st_, i, v)); }
    Stmt& bind(int i, const std::string& v) {
        return check(sqlite3_bind_text(st_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
    }
    // True while there is a row. Throws IoError with SQLite's message.
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
    explicit Txn(Connection& conn) : conn_(conn) { conn_.exec("BEGIN IMMEDIATE"); }
    ~Txn() {
        if (!done_) sqlite3_exec(conn_.db, "ROLLBACK", nullptr, nullptr, nullptr);
    }
    Txn(const Txn&) = delete;
    Txn& operator=(const Txn&) = delete;
    void commit() {
        conn_.exec("COMMIT");
        done_ = true;
    }

private:
    Connection& conn_;
    bool done_ = false;
};

inline constexpr const char* kFindIdempotentSql =
    "SELECT job_id, request FROM idempotency_keys WHERE principal = ? AND key = ?";

// Sum of estimate.cost_usd over the label's jobs; a job cancelled before its first attempt spent
// nothing and does not count.
inline double label_committed_usd(Connection& conn, const std::string& key, const std::string& value) {
    Stmt st(conn,
            "SELECT COALESCE(SUM(json_extract(estimate_json, '$.cost_usd')), 0) FROM jobs "
            "WHERE id IN (SELECT job_id FROM job_labels WHERE key = ? AND value = ?) "
            "AND NOT (state = 'cancelled' AND attempts = 0)");
    st.bind(1, key).bind(2, value);
    return st.step() ? st.f64(0) : 0.0;
}

// Adds a history entry for job `id` (inside the caller's transaction).
inline void add_event(Connection& conn, int64_t id, const std::string& state, int attempt, const std::string& detail,
                      double at) {
    Stmt st(conn, "INSERT INTO job_events(job_id, at, state, attempt, detail) VALUES (?, ?, ?, ?, ?)");
    st.bind(1, id).bind(2, at).bind(3, state).bind(4, attempt).bind(5, detail).step();
}

}  // namespace llmt::server::store_sql
