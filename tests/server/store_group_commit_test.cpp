// JobStore::submit (group commit): concurrent submissions all end durable (read back by a fresh
// store), each created result has its row, the in-transaction checks see the jobs committed before
// them in the same batch (keys, label budgets), and a submission whose statements fail is an error
// with nothing of it stored while the others of its batch are stored.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "core/error.h"
#include "server/jobs/store.h"

namespace {

namespace fs = std::filesystem;
using namespace llmt::server;
using Kind = SubmitResult::Kind;

class GroupCommitTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("llmt_group_commit_" + std::to_string(::getpid()) + "_" +
                                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }
    fs::path db() const { return dir_ / "jobs.sqlite"; }

    static Submission sub(const std::string& name, std::map<std::string, std::string> labels = {},
                          double cost_usd = 0) {
        Submission s;
        s.record.spec.name = name;
        s.record.spec.config_input = "preset";
        s.record.spec.labels = std::move(labels);
        s.record.config_yaml = "x: 1\n";
        s.record.estimate = {{"cost_usd", cost_usd}};
        s.record.submitted_by = "tester";
        s.cost_usd = cost_usd;
        return s;
    }

    // Runs fn(i) for i in [0, n) on n threads released together, so their submissions queue at once.
    static void at_once(int n, const std::function<void(int)>& fn) {
        std::atomic<bool> go{false};
        std::vector<std::thread> ts;
        for (int i = 0; i < n; ++i)
            ts.emplace_back([&, i] {
                while (!go.load()) std::this_thread::yield();
                fn(i);
            });
        go.store(true);
        for (auto& t : ts) t.join();
    }

    // Runs SQL on the database through a connection of its own (as an operator's sqlite3 shell would).
    void outside_sql(const std::string& sql) const {
        sqlite3* h = nullptr;
        ASSERT_EQ(sqlite3_open(db().c_str(), &h), SQLITE_OK);
        char* err = nullptr;
        const int rc = sqlite3_exec(h, sql.c_str(), nullptr, nullptr, &err);
        const std::string msg = err ? err : "";
        sqlite3_free(err);
        sqlite3_close(h);
        ASSERT_EQ(rc, SQLITE_OK) << msg;
    }

    fs::path dir_;
};

TEST_F(GroupCommitTest, ConcurrentSubmissionsAllEndDurableEachWithItsRow) {
    constexpr int kThreads = 16, kEach = 8, kTotal = kThreads * kEach;
    std::vector<int64_t> ids(kTotal, 0);
    uint64_t commits = 0;
    {
        JobStore store(db());
        at_once(kThreads, [&](int t) {
            for (int k = 0; k < kEach; ++k) {
                const int i = t * kEach + k;
                Submission s = sub("job-" + std::to_string(i), {{"bench", "group"}});
                s.idem = IdempotencyKey{"key-" + std::to_string(i), "{\"i\":" + std::to_string(i) + "}"};
                const SubmitResult r = store.submit(s);
                EXPECT_EQ(r.kind, Kind::kCreated) << i;
                ids[static_cast<size_t>(i)] = r.job_id;
            }
        });
        commits = store.group_commits();
        EXPECT_EQ(store.group_committed(), static_cast<uint64_t>(kTotal));
        EXPECT_GE(commits, 1u);
        EXPECT_LE(commits, static_cast<uint64_t>(kTotal));
    }
    // A fresh store on the same file: what each 201 promised is there.
    JobStore reopened(db());
    EXPECT_TRUE(reopened.check_consistency().empty());
    std::set<int64_t> distinct(ids.begin(), ids.end());
    EXPECT_EQ(distinct.size(), static_cast<size_t>(kTotal));
    for (int i = 0; i < kTotal; ++i) {
        auto j = reopened.get(ids[static_cast<size_t>(i)]);
        ASSERT_TRUE(j) << "job of submission " << i << " is missing";
        EXPECT_EQ(j->spec.name, "job-" + std::to_string(i));
        auto k = reopened.find_idempotent("tester", "key-" + std::to_string(i));
        ASSERT_TRUE(k);
        EXPECT_EQ(k->job_id, j->id);
    }
    ListQuery q;
    q.label = {"bench", "group"};
    q.limit = 500;
    EXPECT_EQ(reopened.list(q).size(), static_cast<size_t>(kTotal));
    std::printf("%d submissions from %d threads: %llu group commits\n", kTotal, kThreads,
                static_cast<unsigned long long>(commits));
}

TEST_F(GroupCommitTest, OneKeyTwiceAtOnceMakesOneJob) {
    JobStore store(db());
    std::vector<SubmitResult> out(8);
    at_once(8, [&](int i) {
        Submission s = sub("same");
        s.idem = IdempotencyKey{"one-key", "{\"same\":1}"};
        out[static_cast<size_t>(i)] = store.submit(s);
    });
    int created = 0;
    for (const auto& r : out) {
        created += r.kind == Kind::kCreated;
        EXPECT_TRUE(r.kind == Kind::kCreated || r.kind == Kind::kReplayed);
        EXPECT_EQ(r.job_id, out.front().job_id);
    }
    EXPECT_EQ(created, 1);
    EXPECT_EQ(store.count_by_state()["queued"], 1);
    // The key with another request is refused, naming the first job.
    Submission other = sub("other");
    other.idem = IdempotencyKey{"one-key", "{\"other\":1}"};
    const SubmitResult r = store.submit(other);
    EXPECT_EQ(r.kind, Kind::kKeyReused);
    EXPECT_EQ(r.job_id, out.front().job_id);
    EXPECT_EQ(store.count_by_state()["queued"], 1);
}

TEST_F(GroupCommitTest, LabelBudgetSeesTheJobsBeforeItInTheSameBatch) {
    JobStore store(db());
    // Ten jobs of $0.30 against a $1.00 budget, at once: exactly three fit, whatever the batching.
    std::vector<SubmitResult> out(10);
    at_once(10, [&](int i) {
        Submission s = sub("b" + std::to_string(i), {{"team", "a"}}, 0.30);
        s.budgets = {{"team", "a", 1.00}};
        out[static_cast<size_t>(i)] = store.submit(s);
    });
    int created = 0, over = 0;
    for (const auto& r : out) {
        created += r.kind == Kind::kCreated;
        if (r.kind == Kind::kOverBudget) {
            ++over;
            EXPECT_EQ(r.over.key, "team");
            EXPECT_NEAR(r.committed_usd, 0.90, 1e-9);
        }
    }
    EXPECT_EQ(created, 3);
    EXPECT_EQ(over, 7);
    EXPECT_NEAR(store.label_committed_usd("team", "a"), 0.90, 1e-9);
}

TEST_F(GroupCommitTest, ASubmissionWhoseStatementsFailIsAnErrorAndLeavesNothing) {
    JobStore store(db());
    // A real failure inside the transaction: SQLite refuses the insert of jobs named boom-*.
    outside_sql("CREATE TRIGGER refuse_boom BEFORE INSERT ON jobs WHEN NEW.name LIKE 'boom%' "
                "BEGIN SELECT RAISE(ABORT, 'injected failure'); END;");
    constexpr int kN = 12;
    std::vector<int> outcome(kN, -1);  // 1 created, 0 threw
    std::vector<int64_t> ids(kN, 0);
    at_once(kN, [&](int i) {
        const bool boom = i % 3 == 0;
        Submission s = sub((boom ? "boom-" : "fine-") + std::to_string(i), {{"t", "x"}});
        s.idem = IdempotencyKey{"k" + std::to_string(i), "{}"};
        try {
            ids[static_cast<size_t>(i)] = store.submit(s).job_id;
            outcome[static_cast<size_t>(i)] = 1;
        } catch (const llmt::IoError& e) {
            EXPECT_NE(std::string(e.what()).find("injected failure"), std::string::npos) << e.what();
            outcome[static_cast<size_t>(i)] = 0;
        }
    });
    for (int i = 0; i < kN; ++i) EXPECT_EQ(outcome[static_cast<size_t>(i)], i % 3 == 0 ? 0 : 1) << i;
    outside_sql("DROP TRIGGER refuse_boom");
    JobStore reopened(db());
    EXPECT_TRUE(reopened.check_consistency().empty());
    ListQuery q;
    q.label = {"t", "x"};
    q.limit = 100;
    const auto jobs = reopened.list(q);
    EXPECT_EQ(jobs.size(), static_cast<size_t>(kN - kN / 3));
    for (const auto& j : jobs) EXPECT_EQ(j.spec.name.rfind("fine-", 0), 0u) << j.spec.name;
    for (int i = 0; i < kN; ++i) {
        // A failed submission's key was not kept: its retry creates the job.
        EXPECT_EQ(reopened.find_idempotent("tester", "k" + std::to_string(i)).has_value(), i % 3 != 0) << i;
        if (i % 3 != 0) {
            EXPECT_TRUE(reopened.get(ids[static_cast<size_t>(i)]));
        }
    }
}

}  // namespace
