// JobStore: schema migrations, owner-only files, conditional transitions, admission order, labels,
// history and the consistency check.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "core/error.h"
#include "server/estimate/estimate_history.h"
#include "server/jobs/store.h"

namespace {

namespace fs = std::filesystem;
using namespace llmt::server;

class StoreTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("llmt_store_" + std::to_string(::getpid()) + "_" +
                                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }
    static JobRecord rec(const std::string& name, int priority = 0, std::map<std::string, std::string> labels = {}) {
        JobRecord r;
        r.spec.name = name;
        r.spec.config_input = "preset";
        r.spec.priority = priority;
        r.spec.labels = std::move(labels);
        r.config_yaml = "x: 1\n";
        r.estimate = {{"cost_usd", 1.5}};
        r.submitted_by = "tester";
        return r;
    }
    fs::path dir_;
};

TEST_F(StoreTest, CreatesOwnerOnlyWalDatabaseAtCurrentSchema) {
    {
        JobStore s(dir_ / "db.sqlite");
        EXPECT_EQ(s.schema_version(), JobStore::kSchemaVersion);
        s.insert(rec("a"));
    }
    struct stat st{};
    ASSERT_EQ(::stat((dir_ / "db.sqlite").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir_ / "db.sqlite").c_str(), &db), SQLITE_OK);
    sqlite3_stmt* q = nullptr;
    sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &q, nullptr);
    ASSERT_EQ(sqlite3_step(q), SQLITE_ROW);
    EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(q, 0)), "wal");
    sqlite3_finalize(q);
    sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM schema_migrations", -1, &q, nullptr);
    ASSERT_EQ(sqlite3_step(q), SQLITE_ROW);
    EXPECT_EQ(sqlite3_column_int(q, 0), JobStore::kSchemaVersion);
    sqlite3_finalize(q);
    sqlite3_close(db);
    // Reopening applies nothing twice and keeps the data.
    JobStore again(dir_ / "db.sqlite");
    EXPECT_EQ(again.schema_version(), JobStore::kSchemaVersion);
    EXPECT_EQ(again.list({}).size(), 1u);
}

TEST_F(StoreTest, UpgradesAVersionOneDatabase) {
    // A database as schema version 1 left it: the version-2 columns are added, the rows kept.
    {
        JobStore s(dir_ / "db.sqlite");
        s.insert(rec("old"));
    }
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir_ / "db.sqlite").c_str(), &db), SQLITE_OK);
    // Rebuild jobs without the version-2 columns and forget that migration.
    const char* downgrade =
        "ALTER TABLE jobs DROP COLUMN term_sent_at; ALTER TABLE jobs DROP COLUMN timed_out;"
        "ALTER TABLE jobs DROP COLUMN stop_reason;"
        "DROP TABLE idempotency_keys; DROP INDEX jobs_submitter_state; DELETE FROM schema_migrations WHERE version >= "
        "2;";
    ASSERT_EQ(sqlite3_exec(db, downgrade, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
    JobStore s(dir_ / "db.sqlite");
    EXPECT_EQ(s.schema_version(), JobStore::kSchemaVersion);
    EXPECT_FALSE(s.find_idempotent("bob", "k"));  // the version-3 table is there
    auto j = s.list({});
    ASSERT_EQ(j.size(), 1u);
    EXPECT_EQ(j[0].spec.name, "old");
    EXPECT_EQ(j[0].term_sent_at, 0.0);
    EXPECT_EQ(j[0].stop_reason, "");  // the version-5 column
}

TEST_F(StoreTest, IdempotencyKeysAreKeptPerPrincipalAcrossReopening) {
    {
        JobStore s(dir_ / "db.sqlite");
        JobRecord r = rec("first");
        const int64_t id = s.insert(r, IdempotencyKey{"retry-1", R"({"name":"first"})"});
        auto hit = s.find_idempotent(r.submitted_by, "retry-1");
        ASSERT_TRUE(hit);
        EXPECT_EQ(hit->job_id, id);
        EXPECT_EQ(hit->request, R"({"name":"first"})");
        EXPECT_FALSE(s.find_idempotent("someone-else", "retry-1"));
        // The same key twice for one principal is refused, and the job of the refused insert is rolled back.
        EXPECT_THROW(s.insert(rec("second"), IdempotencyKey{"retry-1", "{}"}), llmt::IoError);
        EXPECT_EQ(s.list({}).size(), 1u);
    }
    JobStore again(dir_ / "db.sqlite");
    auto hit = again.find_idempotent(rec("x").submitted_by, "retry-1");
    ASSERT_TRUE(hit);
    EXPECT_EQ(again.get(hit->job_id)->spec.name, "first");
}

TEST_F(StoreTest, TransitionsAreConditionalAndRecorded) {
    JobStore s(dir_ / "db.sqlite");
    int64_t id = s.insert(rec("a"));
    JobUpdate start;
    start.start_attempt = true;
    start.detail = "attempt 1 started";
    EXPECT_TRUE(s.transition(id, JobState::kQueued, JobState::kRunning, start));
    // A second writer that still thinks the job is queued loses.
    EXPECT_FALSE(s.transition(id, JobState::kQueued, JobState::kCancelled, {}));
    EXPECT_TRUE(s.request_cancel(id));
    EXPECT_FALSE(s.request_cancel(id));
    JobUpdate done;
    done.exit_code = 143;
    done.finish = true;
    done.reason = "cancelled";
    EXPECT_TRUE(s.transition(id, JobState::kRunning, JobState::kCancelled, done));
    auto j = *s.get(id);
    EXPECT_EQ(j.state, JobState::kCancelled);
    EXPECT_EQ(j.attempts, 1);
    EXPECT_EQ(j.exit_code, 143);
    EXPECT_TRUE(j.cancel_requested);
    EXPECT_GT(j.finished_at, 0.0);
    auto h = s.history(id);
    ASSERT_EQ(h.size(), 4u);
    EXPECT_EQ(h[0].state, "queued");
    EXPECT_EQ(h[1].state, "running");
    EXPECT_EQ(h[2].detail, "cancel requested");
    EXPECT_EQ(h[3].state, "cancelled");
    EXPECT_TRUE(s.check_consistency().empty());
}

// The correction of later estimates reads the succeeded jobs of the same device and workload only: an
// image classifier's actual/estimate ratio does not correct a language model's estimate, nor back.
TEST_F(StoreTest, EstimateHistoryKeepsWorkloadsApart) {
    JobStore s(dir_ / "db.sqlite");
    auto succeed = [&](nlohmann::json estimate) {
        JobRecord r = rec("j");
        r.estimate = std::move(estimate);
        const int64_t id = s.insert(r);
        JobUpdate start;
        start.start_attempt = true;
        ASSERT_TRUE(s.transition(id, JobState::kQueued, JobState::kRunning, start));
        JobUpdate done;
        done.finish = true;
        done.exit_code = 0;
        ASSERT_TRUE(s.transition(id, JobState::kRunning, JobState::kSucceeded, done));
    };
    succeed({{"source", "measured"}, {"device", "cpu"}, {"duration_s", 10.0}});
    succeed({{"source", "measured"}, {"device", "cpu"}, {"duration_s", 20.0}, {"workload", "image_classifier"}});
    succeed({{"source", "measured"}, {"device", "cuda"}, {"duration_s", 20.0}, {"workload", "image_classifier"}});
    EXPECT_EQ(estimate_history(s, "cpu").ratios.size(), 1u);
    EXPECT_EQ(estimate_history(s, "cpu", "image_classifier").ratios.size(), 1u);
    EXPECT_EQ(estimate_history(s, "cuda", "image_classifier").ratios.size(), 1u);
    EXPECT_EQ(estimate_history(s, "cuda").ratios.size(), 0u);
}

TEST_F(StoreTest, AdmissionOrderIsPriorityThenSubmission) {
    JobStore s(dir_ / "db.sqlite");
    int64_t a = s.insert(rec("a", 0)), b = s.insert(rec("b", 5)), c = s.insert(rec("c", 0)), d = s.insert(rec("d", 5));
    JobUpdate start;
    start.start_attempt = true;
    start.detail = "attempt 1 started";
    ASSERT_TRUE(s.transition(c, JobState::kQueued, JobState::kRunning, start));
    ASSERT_TRUE(s.transition(c, JobState::kRunning, JobState::kRetrying, {}));  // retrying waits too
    std::vector<int64_t> order;
    for (const auto& j : s.waiting()) order.push_back(j.id);
    EXPECT_EQ(order, (std::vector<int64_t>{b, d, a, c}));
}

TEST_F(StoreTest, LabelsFilterPaginationAndBudgets) {
    JobStore s(dir_ / "db.sqlite");
    for (int i = 0; i < 7; ++i) s.insert(rec("j" + std::to_string(i), 0, {{"team", i % 2 ? "nlp" : "cv"}}));
    ListQuery q;
    q.label = {{"team", "nlp"}};
    EXPECT_EQ(s.list(q).size(), 3u);
    q = {};
    q.limit = 3;
    auto p1 = s.list(q);
    ASSERT_EQ(p1.size(), 3u);
    q.after_id = p1.back().id;
    auto p2 = s.list(q);
    ASSERT_EQ(p2.size(), 3u);
    EXPECT_GT(p2.front().id, p1.back().id);
    EXPECT_DOUBLE_EQ(s.label_committed_usd("team", "nlp"), 3 * 1.5);
    // A job cancelled before it ran no longer counts against its label.
    JobUpdate u;
    u.finish = true;
    ASSERT_TRUE(s.transition(2, JobState::kQueued, JobState::kCancelled, u));
    EXPECT_DOUBLE_EQ(s.label_committed_usd("team", "nlp"), 2 * 1.5);
}

// List rows leave the configs in SQLite; newest-first pages with a cursor; count ignores cursors.
TEST_F(StoreTest, ListRowsWithoutConfigsNewestFirst) {
    JobStore s(dir_ / "db.sqlite");
    for (int i = 0; i < 5; ++i) {
        JobRecord r = rec("n" + std::to_string(i), 0, {{"team", "a"}});
        r.spec.overrides = {{"trainer.lr", std::string(1000, '1')}};
        s.insert(r);
    }
    ListQuery q;
    q.newest_first = true;
    q.limit = 2;
    auto p1 = s.list(q);
    ASSERT_EQ(p1.size(), 2u);
    EXPECT_EQ(p1[0].spec.name, "n4");
    EXPECT_EQ(p1[1].spec.name, "n3");
    EXPECT_TRUE(p1[0].config_yaml.empty());
    EXPECT_TRUE(p1[0].spec.overrides.empty());
    EXPECT_EQ(p1[0].spec.labels.at("team"), "a");
    q.before_id = p1.back().id;
    auto p2 = s.list(q);
    ASSERT_EQ(p2.size(), 2u);
    EXPECT_EQ(p2[0].spec.name, "n2");
    EXPECT_EQ(s.count(q), 5);
    const auto full = s.get(p1[0].id);
    ASSERT_TRUE(full);
    EXPECT_EQ(full->config_yaml, "x: 1\n");
    EXPECT_EQ(full->spec.overrides.at("trainer.lr").size(), 1000u);
}

// A submitter's queue quota is checked in the submission's transaction: past it nothing is inserted,
// other submitters are unaffected, and a job leaving the queue makes room.
TEST_F(StoreTest, QueueQuotaPerSubmitter) {
    JobStore s(dir_ / "db.sqlite");
    auto submit = [&](const std::string& by) {
        Submission sub;
        sub.record = rec("q");
        sub.record.submitted_by = by;
        sub.max_waiting = 2;
        return s.submit(sub);
    };
    EXPECT_EQ(submit("bob").kind, SubmitResult::Kind::kCreated);
    const SubmitResult second = submit("bob");
    EXPECT_EQ(second.kind, SubmitResult::Kind::kCreated);
    const SubmitResult third = submit("bob");
    EXPECT_EQ(third.kind, SubmitResult::Kind::kOverQueueQuota);
    EXPECT_EQ(third.waiting, 2);
    EXPECT_EQ(submit("carol").kind, SubmitResult::Kind::kCreated);
    EXPECT_EQ(s.list({}).size(), 3u);
    JobUpdate u;
    u.finish = true;
    ASSERT_TRUE(s.transition(second.job_id, JobState::kQueued, JobState::kCancelled, u));
    EXPECT_EQ(submit("bob").kind, SubmitResult::Kind::kCreated);
}

TEST_F(StoreTest, ConcurrentWritersKeepTheStoreConsistent) {
    JobStore s(dir_ / "db.sqlite");
    std::vector<std::thread> ts;
    for (int t = 0; t < 8; ++t)
        ts.emplace_back([&s, t] {
            for (int i = 0; i < 25; ++i) {
                int64_t id = s.insert(rec("t" + std::to_string(t)));
                if (i % 3 == 0) s.transition(id, JobState::kQueued, JobState::kCancelled, {});
            }
        });
    for (auto& t : ts) t.join();
    auto counts = s.count_by_state();
    EXPECT_EQ(counts["queued"] + counts["cancelled"], 200);
    EXPECT_EQ(counts["cancelled"], 8 * 9);
    EXPECT_TRUE(s.check_consistency().empty());
}

}  // namespace
