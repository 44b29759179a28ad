// Scheduler decisions with a scripted executor (a test double standing in for processes; the real
// local executor is covered by api_test and crash_test): gang admission, priority, quotas, retries,
// bad input, cancel (SIGTERM then SIGKILL), max_runtime_s, disk quotas, reconciliation of lost attempts.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "core/fs.h"
#include "server/scheduler/executor.h"
#include "server/scheduler/scheduler.h"
#include "server/jobs/store.h"

namespace {

namespace fs = std::filesystem;
using namespace llmt::server;

// Attempts "run" until the test sets their outcome.
class ScriptedExecutor : public Executor {
public:
    std::string name() const override { return "scripted"; }
    void validate(const JobSpec&) const override {}
    std::string start(const AttemptRequest& req, const std::function<void(const std::string&)>& record) override {
        std::string h = std::to_string(req.job_id) + "/" + std::to_string(req.attempt);
        record(h);
        status[h] = {AttemptStatus::kRunning, 0, ""};
        started.push_back(req.job_id);
        return h;
    }
    AttemptStatus poll(const std::string& handle) override {
        auto it = status.find(handle);
        return it == status.end() ? AttemptStatus{AttemptStatus::kLost, 0, "unknown"} : it->second;
    }
    void stop(const std::string& handle, bool kill) override {
        signals.push_back(handle + (kill ? " KILL" : " TERM"));
    }
    std::vector<RankLog> rank_logs(const fs::path&, const JobSpec&) const override { return {}; }
    bool jobs_see_local_files() const override { return true; }
    fs::path job_write_root(const AttemptRequest& req) const override { return req.job_dir; }

    void exit(int64_t id, int attempt, int code) {
        status[std::to_string(id) + "/" + std::to_string(attempt)] = {AttemptStatus::kExited, code, ""};
    }
    std::map<std::string, AttemptStatus> status;
    std::vector<int64_t> started;
    std::vector<std::string> signals;
};

class SchedulerTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("llmt_sched_" + std::to_string(::getpid()) + "_" +
                                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_);
        store_ = std::make_unique<JobStore>(dir_ / "db.sqlite");
        preset_ = llmt::read_file(fs::path(LLMT_SOURCE_DIR) / "configs/presets/gpt2_tiny_cpu.yaml");
    }
    void TearDown() override { fs::remove_all(dir_); }
    Scheduler make(int cpus, Quotas q = {}, double grace = 30) {
        // The preset's data, as a server started in the checkout lets jobs read it (server/jobs/job_access.h).
        JobAccessPolicy access;
        access.relative_base = LLMT_SOURCE_DIR;
        access.read_roots = {fs::path(LLMT_SOURCE_DIR) / "data"};
        return Scheduler(*store_, exec_, SchedulerOptions{dir_, Capacity{cpus, 0}, std::move(q), grace, 0.25, access});
    }
    int64_t submit(const std::string& name, int nproc = 1, int priority = 0,
                   std::map<std::string, std::string> labels = {}, int max_retries = 2, double max_runtime_s = 0,
                   const std::string& by = "t") {
        JobRecord r;
        r.spec.name = name;
        r.spec.config_input = "gpt2_tiny_cpu";
        r.spec.nproc_per_node = nproc;
        r.spec.priority = priority;
        r.spec.labels = std::move(labels);
        r.spec.max_retries = max_retries;
        r.spec.max_runtime_s = max_runtime_s;
        r.config_yaml = preset_;
        r.estimate = {{"cost_usd", 0.0}};
        r.submitted_by = by;
        return store_->insert(r);
    }
    JobState state(int64_t id) { return store_->get(id)->state; }
    fs::path dir_;
    std::string preset_;
    std::unique_ptr<JobStore> store_;
    ScriptedExecutor exec_;
};

TEST_F(SchedulerTest, GangAdmissionInPriorityOrderWithoutStarvation) {
    auto s = make(2);
    int64_t wide = submit("wide", 2), urgent = submit("urgent", 1, 5), small = submit("small", 1);
    s.tick();
    // urgent first; wide (2 ranks) does not fit beside it and small may not jump ahead of wide.
    EXPECT_EQ(exec_.started, (std::vector<int64_t>{urgent}));
    EXPECT_EQ(state(wide), JobState::kQueued);
    EXPECT_EQ(state(small), JobState::kQueued);
    exec_.exit(urgent, 1, 0);
    s.tick();
    EXPECT_EQ(state(urgent), JobState::kSucceeded);
    EXPECT_EQ(exec_.started, (std::vector<int64_t>{urgent, wide}));  // all of wide's ranks at once
    EXPECT_EQ(state(small), JobState::kQueued);
    // The resolved config with the job's own run directory was written for the attempt.
    auto cfg = llmt::read_file(dir_ / "jobs" / std::to_string(wide) / "config.yaml");
    EXPECT_NE(cfg.find((dir_ / "jobs" / std::to_string(wide) / "runs").string()), std::string::npos) << cfg;
    EXPECT_NE(cfg.find("job-" + std::to_string(wide)), std::string::npos);
}

TEST_F(SchedulerTest, RetriesRuntimeFailuresButNotBadInput) {
    auto s = make(4);
    int64_t flaky = submit("flaky", 1, 0, {}, 1), bad = submit("bad");
    s.tick();
    exec_.exit(flaky, 1, 1);
    exec_.exit(bad, 1, 2);
    s.tick();  // flaky -> retrying; bad -> failed
    EXPECT_EQ(state(bad), JobState::kFailed);
    EXPECT_EQ(store_->get(bad)->attempts, 1);
    s.tick();  // flaky admitted again
    EXPECT_EQ(state(flaky), JobState::kRunning);
    EXPECT_EQ(store_->get(flaky)->attempts, 2);
    exec_.exit(flaky, 2, 1);
    s.tick();
    auto j = *store_->get(flaky);
    EXPECT_EQ(j.state, JobState::kFailed);  // 1 + max_retries attempts used
    EXPECT_EQ(j.attempts, 2);
    EXPECT_NE(j.reason.find("attempt 2 of 2"), std::string::npos) << j.reason;
    EXPECT_TRUE(store_->check_consistency().empty());
}

// The access policy again at start (server/jobs/job_access.h): a stored job that reads outside the roots (the
// operator narrowed them since the submit) never starts; a text job's cache is placed in its directory.
TEST_F(SchedulerTest, AttemptsStartOnlyInsideTheAccessPolicyWithWritesInTheJobsDirectory) {
    auto s = make(2);
    JobRecord r;
    r.spec.name = "outside";
    r.config_yaml = preset_ + "\n";
    r.config_yaml.replace(r.config_yaml.find("data/shards/gpt2_corpus/train_*.bin"),
                          std::string("data/shards/gpt2_corpus/train_*.bin").size(), "/etc/*");
    r.estimate = {{"cost_usd", 0.0}};
    const int64_t outside = store_->insert(r);
    r.spec.name = "text";
    r.config_yaml = "data: {source: text, paths: [data/corpus/a.txt], cache_dir: c}\n";
    const int64_t text = store_->insert(r);
    s.tick();
    EXPECT_EQ(state(outside), JobState::kFailed);
    EXPECT_NE(store_->get(outside)->reason.find("data.train_shards '/etc/*' is outside"), std::string::npos)
        << store_->get(outside)->reason;
    EXPECT_EQ(exec_.started, (std::vector<int64_t>{text}));
    auto cfg = llmt::read_file(dir_ / "jobs" / std::to_string(text) / "config.yaml");
    EXPECT_NE(cfg.find("cache_dir: " + (dir_ / "jobs" / std::to_string(text) / "c").string()), std::string::npos)
        << cfg;
}

TEST_F(SchedulerTest, CancelSendsTermThenKillAfterGrace) {
    auto s = make(1, {}, 0.0);
    int64_t id = submit("c");
    s.tick();
    ASSERT_TRUE(store_->request_cancel(id));
    s.tick();
    ASSERT_EQ(exec_.signals.size(), 1u);
    EXPECT_EQ(exec_.signals[0], std::to_string(id) + "/1 TERM");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    s.tick();  // grace 0 s: the next pass escalates
    ASSERT_EQ(exec_.signals.size(), 2u);
    EXPECT_EQ(exec_.signals[1], std::to_string(id) + "/1 KILL");
    exec_.exit(id, 1, 137);
    s.tick();
    EXPECT_EQ(state(id), JobState::kCancelled);
}

TEST_F(SchedulerTest, MaxRuntimeStopsGracefullyAndFails) {
    auto s = make(1);
    int64_t id = submit("slow", 1, 0, {}, 2, 0.05);
    s.tick();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    s.tick();
    ASSERT_EQ(exec_.signals, (std::vector<std::string>{std::to_string(id) + "/1 TERM"}));
    exec_.exit(id, 1, 143);  // checkpointed and exited
    s.tick();
    auto j = *store_->get(id);
    EXPECT_EQ(j.state, JobState::kFailed);  // not retried: it would only time out again
    EXPECT_NE(j.reason.find("max_runtime_s"), std::string::npos) << j.reason;
}

TEST_F(SchedulerTest, DiskQuotaStopsTheJobLikeACancelAndFailsItKeepingItsFiles) {
    Quotas q;
    q.submitters["bob"].max_disk_mb = 1;
    JobAccessPolicy access;
    access.relative_base = LLMT_SOURCE_DIR;
    access.read_roots = {fs::path(LLMT_SOURCE_DIR) / "data"};
    Scheduler s(*store_, exec_, SchedulerOptions{dir_, Capacity{2, 0}, q, 30, 0.25, access, 0, 0.1});
    const int64_t bob = submit("bob", 1, 0, {}, 2, 0, "bob"), carol = submit("carol", 1, 0, {}, 2, 0, "carol");
    s.tick();
    ASSERT_EQ(state(bob), JobState::kRunning);
    // Both write 2 MiB of checkpoints; only bob has a disk quota (1 MB).
    for (int64_t id : {bob, carol}) {
        const fs::path f = Scheduler::job_dir(dir_, id) / "runs/checkpoints/step_1/model.safetensors";
        fs::create_directories(f.parent_path());
        std::ofstream(f, std::ios::binary) << std::string(2 << 20, 'x');
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    s.tick();
    ASSERT_EQ(exec_.signals, (std::vector<std::string>{std::to_string(bob) + "/1 TERM"}));
    EXPECT_NE(store_->get(bob)->stop_reason.find("for submitter bob"), std::string::npos);
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    s.tick();
    EXPECT_EQ(exec_.signals.size(), 1u) << "a job being stopped is not signalled again";
    exec_.exit(bob, 1, 143);  // checkpointed and exited
    s.tick();
    const JobRecord j = *store_->get(bob);
    EXPECT_EQ(j.state, JobState::kFailed);  // not retried: it would pass its limit again
    EXPECT_EQ(j.reason.rfind("disk_quota_exceeded (used 2.0 MB > limit 1 MB for submitter bob)", 0), 0u) << j.reason;
    EXPECT_NE(j.reason.find("exit code 143"), std::string::npos) << j.reason;
    EXPECT_TRUE(fs::exists(Scheduler::job_dir(dir_, bob) / "runs/checkpoints/step_1/model.safetensors"));
    EXPECT_EQ(state(carol), JobState::kRunning);
}

TEST_F(SchedulerTest, LabelQuotaHoldsOnlyThatLabel) {
    Quotas q;
    q.labels["team=a"] = LabelQuota{1, -1, -1, -1};
    auto s = make(3, q);
    int64_t a1 = submit("a1", 1, 0, {{"team", "a"}}), a2 = submit("a2", 1, 0, {{"team", "a"}}), b = submit("b");
    s.tick();
    EXPECT_EQ(state(a1), JobState::kRunning);
    EXPECT_EQ(state(a2), JobState::kQueued);
    EXPECT_EQ(state(b), JobState::kRunning);
    exec_.exit(a1, 1, 0);
    s.tick();
    EXPECT_EQ(state(a2), JobState::kRunning);
}

TEST_F(SchedulerTest, SubmitterQuotaHoldsOnlyThatSubmitter) {
    Quotas q;
    q.submitters["bob"].max_running = 1;
    auto s = make(3, q);
    int64_t b1 = submit("b1", 1, 0, {}, 2, 0, "bob"), b2 = submit("b2", 1, 0, {}, 2, 0, "bob");
    int64_t c1 = submit("c1", 1, 0, {}, 2, 0, "carol");
    s.tick();
    EXPECT_EQ(state(b1), JobState::kRunning);
    EXPECT_EQ(state(b2), JobState::kQueued);
    EXPECT_EQ(state(c1), JobState::kRunning);
    exec_.exit(b1, 1, 0);
    s.tick();
    EXPECT_EQ(state(b2), JobState::kRunning);
}

TEST_F(SchedulerTest, ZeroCapacityHoldsEverything) {
    auto s = make(0);
    int64_t id = submit("held");
    s.tick();
    EXPECT_EQ(state(id), JobState::kQueued);
    EXPECT_TRUE(exec_.started.empty());
}

TEST_F(SchedulerTest, LostAttemptIsRetried) {
    auto s = make(1);
    int64_t id = submit("lost");
    s.tick();
    exec_.status.clear();  // the attempt vanished (e.g. its supervisor was killed while the server was down)
    s.tick();  // finishes the lost attempt (-> retrying) and, capacity being free, admits it again
    EXPECT_EQ(state(id), JobState::kRunning);
    EXPECT_EQ(store_->get(id)->attempts, 2);
    std::vector<std::string> states;
    for (const auto& e : store_->history(id)) states.push_back(e.state);
    EXPECT_EQ(states, (std::vector<std::string>{"queued", "running", "retrying", "running"}));
}

}  // namespace
