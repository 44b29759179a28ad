// JobStore::submit: group commit. A submission queues; the first one that finds no commit running
// takes the whole queue and commits it as one transaction (one fsync with synchronous=FULL), each
// submission in a savepoint so one that fails leaves the others in; the rest wait for the commit that
// holds theirs. Nobody is answered before the COMMIT that holds their row returned.
#include <exception>

#include "server/jobs/store.h"
#include "server/jobs/store_sql.h"

namespace llmt::server {

using store_sql::Connection;
using store_sql::Stmt;

struct JobStore::Pending {
    const Submission* submission = nullptr;
    SubmitResult result;
    std::exception_ptr error;
    bool done = false;
};

namespace {

// One submission inside the batch's transaction: its key, its budgets, then its rows.
SubmitResult apply_submission(Connection& c, const Submission& s, double now) {
    SubmitResult out;
    const JobRecord& r = s.record;
    if (s.idem) {
        Stmt k(c, store_sql::kFindIdempotentSql);
        k.bind(1, r.submitted_by).bind(2, s.idem->key);
        if (k.step()) {
            out.job_id = k.i64(0);
            out.kind = k.text(1) == s.idem->request ? SubmitResult::Kind::kReplayed : SubmitResult::Kind::kKeyReused;
            return out;
        }
    }
    if (s.max_waiting >= 0) {
        Stmt w(c, "SELECT COUNT(*) FROM jobs WHERE submitted_by = ? AND state IN ('queued', 'retrying')");
        w.bind(1, r.submitted_by);
        out.waiting = w.step() ? w.i64(0) : 0;
        if (out.waiting >= s.max_waiting) {
            out.kind = SubmitResult::Kind::kOverQueueQuota;
            return out;
        }
    }
    for (const LabelBudget& b : s.budgets) {
        const double used = store_sql::label_committed_usd(c, b.key, b.value);
        if (s.cost_usd > b.budget_usd - used) {
            out.kind = SubmitResult::Kind::kOverBudget;
            out.over = b;
            out.committed_usd = used;
            return out;
        }
    }
    {
        Stmt st(c,
                "INSERT INTO jobs(name, state, priority, spec_json, config_yaml, estimate_json, submitted_by, "
                "created_at) VALUES (?, 'queued', ?, ?, ?, ?, ?, ?)");
        st.bind(1, r.spec.name).bind(2, r.spec.priority).bind(3, r.spec.to_json().dump()).bind(4, r.config_yaml);
        st.bind(5, r.estimate.dump()).bind(6, r.submitted_by).bind(7, now).step();
    }
    out.job_id = sqlite3_last_insert_rowid(c.db);
    for (const auto& [k, v] : r.spec.labels) {
        Stmt l(c, "INSERT INTO job_labels(job_id, key, value) VALUES (?, ?, ?)");
        l.bind(1, out.job_id).bind(2, k).bind(3, v).step();
    }
    store_sql::add_event(c, out.job_id, "queued", 0, "submitted by " + r.submitted_by, now);
    if (s.idem) {
        Stmt k(c, "INSERT INTO idempotency_keys(principal, key, request, job_id, created_at) VALUES (?, ?, ?, ?, ?)");
        k.bind(1, r.submitted_by)
            .bind(2, s.idem->key)
            .bind(3, s.idem->request)
            .bind(4, out.job_id)
            .bind(5, now)
            .step();
    }
    out.kind = SubmitResult::Kind::kCreated;
    return out;
}

}  // namespace

void JobStore::commit_batch(const std::vector<Pending*>& batch) {
    std::lock_guard lock(write_->mu);
    Connection& c = *write_;
    try {
        store_sql::Txn txn(c);
        const double now = unix_now();
        for (Pending* p : batch) {
            c.exec("SAVEPOINT submission");
            try {
                p->result = apply_submission(c, *p->submission, now);
                c.exec("RELEASE submission");
            } catch (...) {
                p->error = std::current_exception();
                c.exec("ROLLBACK TO submission");
                c.exec("RELEASE submission");
            }
        }
        txn.commit();
        generation_.fetch_add(1);
    } catch (...) {
        // BEGIN or COMMIT failed (or a savepoint could not be rolled back): nothing of the batch is
        // stored, so nobody in it may hear "created".
        const std::exception_ptr failed = std::current_exception();
        for (Pending* p : batch)
            if (!p->error) p->error = failed;
    }
}

SubmitResult JobStore::submit(const Submission& s) {
    Pending mine;
    mine.submission = &s;
    std::unique_lock lock(queue_mu_);
    queue_.push_back(&mine);
    while (!mine.done) {
        if (committing_) {
            queue_cv_.wait(lock);
            continue;
        }
        // No commit is running and this submission is not done, so it is still queued: this thread
        // commits everything queued, its own submission included.
        committing_ = true;
        std::vector<Pending*> batch;
        batch.swap(queue_);
        lock.unlock();
        commit_batch(batch);
        lock.lock();
        for (Pending* p : batch) p->done = true;
        ++commits_;
        committed_ += batch.size();
        committing_ = false;
        queue_cv_.notify_all();
    }
    lock.unlock();
    if (mine.error) std::rethrow_exception(mine.error);
    return mine.result;
}

uint64_t JobStore::group_commits() const {
    std::lock_guard lock(queue_mu_);
    return commits_;
}

uint64_t JobStore::group_committed() const {
    std::lock_guard lock(queue_mu_);
    return committed_;
}

}  // namespace llmt::server
