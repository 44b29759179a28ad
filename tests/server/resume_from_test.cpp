// POST /v1/jobs with "resume_from": N (server/jobs/job_resume.h) through a real `llmtrain serve`: a bad value
// or a job that cannot be resumed is refused naming the field; a resumed job continues job N's run from
// its latest checkpoint in its own run directory (its first logged step follows N's last), and job N's
// files stay as they were.
#include <regex>
#include <sstream>

#include "server_fixture.h"

namespace {

namespace fs = std::filesystem;
using namespace llmt::testing;

class ResumeFromTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        root_ = fs::temp_directory_path() / ("llmt_resume_from_" + std::to_string(::getpid()));
        shards_ = prepare_shards(root_);
        server_ = new ServeProcess(root_ / "srv", {"--capacity", "cpus=1,gpus=0"});
    }
    static void TearDownTestSuite() {
        if (!server_) return;
        Api admin(server_->port(), kAdminToken);
        cancel_jobs(admin, {"running", "queued", "retrying"});
        delete server_;
        fs::remove_all(root_);
    }
    static nlohmann::json body(const std::string& name, int steps) {
        return {{"name", name}, {"config", tiny_config(shards_, steps, 4)}};
    }
    static std::string state_of(Api& api, int64_t id) {
        return api.get("/v1/jobs/" + std::to_string(id)).body.value("state", "");
    }
    static fs::path run_dir(int64_t id) {
        return root_ / "srv/data/jobs" / std::to_string(id) / "runs" / ("job-" + std::to_string(id));
    }
    static std::vector<int64_t> logged_steps(const fs::path& run) {
        std::vector<int64_t> steps;
        std::istringstream in(llmt::read_file(run / "metrics.jsonl"));
        for (std::string line; std::getline(in, line);) {
            auto j = nlohmann::json::parse(line, nullptr, false);
            if (j.is_object() && j.contains("loss")) steps.push_back(j["step"]);
        }
        return steps;
    }
    static fs::path root_, shards_;
    static ServeProcess* server_;
};
fs::path ResumeFromTest::root_, ResumeFromTest::shards_;
ServeProcess* ResumeFromTest::server_ = nullptr;

TEST_F(ResumeFromTest, RefusesWhatCannotBeResumedNamingTheField) {
    Api api(server_->port(), kSubmitterToken);
    for (const char* bad : {R"("3")", "0", "-1", "1.5", "null"}) {
        auto b = body("bad", 4);
        b["resume_from"] = nlohmann::json::parse(bad);
        auto r = api.post("/v1/jobs", b);
        EXPECT_EQ(r.status, 400) << bad << ": " << r.text;
        EXPECT_EQ(r.body["error"]["field"], "resume_from") << r.text;
    }
    auto b = body("missing", 4);
    b["resume_from"] = 999999;
    auto r = api.post("/v1/jobs", b);
    EXPECT_EQ(r.status, 400) << r.text;
    EXPECT_NE(r.body["error"]["message"].get<std::string>().find("no job 999999"), std::string::npos) << r.text;

    // A job that has not ended (this one runs for long) cannot be resumed yet: 409.
    auto longer = api.post("/v1/jobs", body("long", 100000));
    ASSERT_EQ(longer.status, 201) << longer.text;
    const int64_t id = longer.body["id"];
    b["resume_from"] = id;
    r = api.post("/v1/jobs", b);
    EXPECT_EQ(r.status, 409) << r.text;
    EXPECT_EQ(r.body["error"]["field"], "resume_from");
    // A job cancelled before it wrote any checkpoint: nothing to resume, 422.
    auto queued = api.post("/v1/jobs", body("never-ran", 4));
    ASSERT_EQ(queued.status, 201);
    const int64_t never = queued.body["id"];
    ASSERT_EQ(api.post("/v1/jobs/" + std::to_string(never) + "/cancel", "").status, 202);
    ASSERT_EQ(state_of(api, never), "cancelled");
    b["resume_from"] = never;
    r = api.post("/v1/jobs", b);
    EXPECT_EQ(r.status, 422) << r.text;
    EXPECT_EQ(r.body["error"]["code"], "no_checkpoint") << r.text;
    // The estimate route checks the same way.
    EXPECT_EQ(api.post("/v1/estimate", b).status, 422);
    api.post("/v1/jobs/" + std::to_string(id) + "/cancel", "");
    ASSERT_TRUE(wait_for([&] { return state_of(api, id) == "cancelled"; }, 120)) << server_->log();
}

TEST_F(ResumeFromTest, ResumedJobContinuesFromTheLatestCheckpointInItsOwnRun) {
    Api api(server_->port(), kSubmitterToken);
    auto first = api.post("/v1/jobs", body("first", 8));
    ASSERT_EQ(first.status, 201) << first.text;
    const int64_t a = first.body["id"];
    ASSERT_TRUE(wait_for([&] { return state_of(api, a) == "succeeded"; }, 300))
        << api.get("/v1/jobs/" + std::to_string(a)).text << server_->log();
    const auto a_steps = logged_steps(run_dir(a));
    ASSERT_EQ(a_steps.back(), 8);
    const std::string a_metrics = llmt::read_file(run_dir(a) / "metrics.jsonl");

    // The same config with more steps, continuing job a: steps 9..12 only.
    auto b = body("second", 12);
    b["resume_from"] = a;
    auto second = api.post("/v1/jobs", b);
    ASSERT_EQ(second.status, 201) << second.text;
    const int64_t id = second.body["id"];
    ASSERT_TRUE(wait_for([&] { return state_of(api, id) == "succeeded"; }, 300))
        << api.get("/v1/jobs/" + std::to_string(id)).text << server_->log();
    auto job = api.get("/v1/jobs/" + std::to_string(id));
    EXPECT_EQ(job.body["spec"]["resume_from"], a) << job.text;

    auto log = api.get("/v1/jobs/" + std::to_string(id) + "/logs");
    EXPECT_NE(log.text.find("resume: "), std::string::npos) << log.text;
    EXPECT_NE(log.text.find("at step 8"), std::string::npos) << log.text;
    // It trained steps 9..12 only: no step line of the first 8 (a fresh run would log "step 1/12").
    EXPECT_FALSE(std::regex_search(log.text, std::regex(R"((^|\n)step +[1-8]/12 )"))) << log.text;
    EXPECT_TRUE(std::regex_search(log.text, std::regex(R"((^|\n)step +9/12 )"))) << log.text;
    const auto steps = logged_steps(run_dir(id));
    ASSERT_FALSE(steps.empty());
    EXPECT_EQ(steps.back(), 12);
    // The history up to step 8 is job a's (copied), then this job's steps 9..12: no step trained twice.
    EXPECT_EQ(steps, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
    EXPECT_EQ(job.body["result"]["steps"], 12) << job.text;

    // Job a is untouched: its metrics and its checkpoints as they were.
    EXPECT_EQ(llmt::read_file(run_dir(a) / "metrics.jsonl"), a_metrics);
    EXPECT_FALSE(fs::exists(run_dir(a) / "checkpoints/step_12")) << "the resumed job wrote into job a's run";
    EXPECT_TRUE(fs::exists(run_dir(id) / "checkpoints")) << "the resumed job has its own checkpoints";
}

}  // namespace
