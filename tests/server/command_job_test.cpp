// Command jobs in a real `llmtrain serve` (server/jobs/command_job.h): the 2-process PyTorch DDP script of
// tests/launch (Debian's torch 1.13) submitted with a runner token ends succeeded, with the JSON lines it
// wrote to LLMTRAIN_METRICS_FILE as the job's metrics and LLMTRAIN_OUTPUT_DIR's files as its artifacts; a
// submitter token gets 403, and a server without --allow-command-jobs refuses every token.
#include "server/server_fixture.h"

namespace {

namespace fs = std::filesystem;
using namespace llmt::testing;
using Json = nlohmann::json;

const std::string kScript = std::string(LLMT_SOURCE_DIR) + "/tests/launch/scripts/ddp_tiny.py";

Json ddp_job(const std::string& name) {
    return {{"name", name},
            {"command", {"/usr/bin/python3", kScript, "--steps", "4"}},
            {"nproc_per_node", 2},
            {"max_retries", 0}};
}

class CommandJobTest : public ::testing::Test {
protected:
    void SetUp() override {
        root_ = fs::temp_directory_path() / ("llmt_command_job_" + std::to_string(::getpid()));
        fs::remove_all(root_);
    }
    void TearDown() override {
        if (server_) {
            Api admin(server_->port(), kAdminToken);
            cancel_jobs(admin, {"queued", "running", "retrying"});
        }
        server_.reset();
        fs::remove_all(root_);
    }
    fs::path root_;
    std::unique_ptr<ServeProcess> server_;
};

TEST_F(CommandJobTest, DdpScriptSucceedsWithItsMetricsAndArtifactsOnTheJob) {
    if (system("/usr/bin/python3 -c 'import torch.distributed' >/dev/null 2>&1") != 0)
        GTEST_SKIP() << "Debian's python3-torch is not installed at /usr/bin/python3";
    server_ = std::make_unique<ServeProcess>(root_ / "srv", std::vector<std::string>{"--allow-command-jobs",
                                                                                      "--capacity", "cpus=2,gpus=0"});
    Api rita(server_->port(), kRunnerToken);
    auto r = rita.post("/v1/jobs", ddp_job("mnist-ddp"));
    ASSERT_EQ(r.status, 201) << r.text;
    const std::string id = std::to_string(r.body["id"].get<int64_t>());
    EXPECT_EQ(r.body["estimate"]["source"], "unmeasured") << r.text;  // no max_runtime_s: no cost bound

    std::string state;
    ASSERT_TRUE(wait_for([&] {
        state = rita.get("/v1/jobs/" + id).body.value("state", "");
        return state == "succeeded" || state == "failed";
    }, 300)) << server_->log();
    auto job = rita.get("/v1/jobs/" + id);
    auto log = rita.get("/v1/jobs/" + id + "/logs?rank=1").text;
    ASSERT_EQ(state, "succeeded") << job.text << "\n" << log;
    EXPECT_EQ(job.body["spec"]["command"][0], "/usr/bin/python3");
    EXPECT_NE(log.find("done rank=1 steps=4"), std::string::npos) << log;
    // The script ran with torchrun's environment through llmtrain launch.
    EXPECT_NE(log.find("WORLD_SIZE=2"), std::string::npos) << log;
    EXPECT_NE(log.find("TORCHELASTIC_USE_AGENT_STORE=False"), std::string::npos) << log;

    // Metrics: rank 0 wrote one line per step to LLMTRAIN_METRICS_FILE; they are the job's metrics.
    auto m = rita.get("/v1/jobs/" + id + "/metrics");
    ASSERT_EQ(m.status, 200) << m.text;
    ASSERT_EQ(m.body["points"].size(), 4u) << m.text;
    EXPECT_EQ(m.body["last_step"], 4);
    EXPECT_TRUE(m.body["points"][3]["train_loss"].is_number()) << m.text;
    EXPECT_EQ(job.body["latest_metrics"]["step"], 4) << job.text;
    // Artifacts: what it wrote under LLMTRAIN_OUTPUT_DIR.
    auto a = rita.get("/v1/jobs/" + id + "/artifacts");
    ASSERT_EQ(a.status, 200) << a.text;
    std::vector<std::string> paths;
    for (const auto& f : a.body["files"]) paths.push_back(f["path"]);
    EXPECT_NE(std::find(paths.begin(), paths.end(), "model.pt"), paths.end()) << a.text;
    EXPECT_NE(std::find(paths.begin(), paths.end(), "metrics.jsonl"), paths.end()) << a.text;
}

// Retried and cancelled like a training job (no torch: small shell commands). The job's directory is its
// working directory, so a marker file there tells the second attempt from the first.
TEST_F(CommandJobTest, AFailedAttemptIsRetriedAndACancelStopsTheProgram) {
    server_ = std::make_unique<ServeProcess>(root_ / "srv", std::vector<std::string>{"--allow-command-jobs",
                                                                                      "--capacity", "cpus=2,gpus=0"});
    Api rita(server_->port(), kRunnerToken);
    auto r =
        rita.post("/v1/jobs", Json{{"name", "flaky"},
                                   {"command", {"/bin/sh", "-c", "[ -e marker ] && exit 0; touch marker; exit 3"}},
                                   {"max_retries", 1}});
    ASSERT_EQ(r.status, 201) << r.text;
    const std::string id = std::to_string(r.body["id"].get<int64_t>());
    Http job;
    ASSERT_TRUE(wait_for([&] {
        job = rita.get("/v1/jobs/" + id);
        const std::string st = job.body.value("state", "");
        return st == "succeeded" || st == "failed";
    }, 120)) << server_->log();
    EXPECT_EQ(job.body["state"], "succeeded") << job.text;
    EXPECT_EQ(job.body["attempts"], 2) << job.text;

    r = rita.post("/v1/jobs", Json{{"name", "sleeper"}, {"command", {"/bin/sleep", "300"}}});
    ASSERT_EQ(r.status, 201) << r.text;
    const std::string sid = std::to_string(r.body["id"].get<int64_t>());
    ASSERT_TRUE(wait_for([&] { return rita.get("/v1/jobs/" + sid).body.value("state", "") == "running"; }, 60));
    EXPECT_EQ(rita.post("/v1/jobs/" + sid + "/cancel", "").status, 202);
    EXPECT_TRUE(wait_for([&] { return rita.get("/v1/jobs/" + sid).body.value("state", "") == "cancelled"; }, 60))
        << rita.get("/v1/jobs/" + sid).text;
}

TEST_F(CommandJobTest, OnlyRunnerAndAdminTokensMaySubmitOne) {
    server_ = std::make_unique<ServeProcess>(root_ / "srv", std::vector<std::string>{"--allow-command-jobs"});
    auto sub = Api(server_->port(), kSubmitterToken).post("/v1/jobs", ddp_job("by-bob"));
    EXPECT_EQ(sub.status, 403) << sub.text;
    EXPECT_EQ(sub.body["error"]["code"], "forbidden") << sub.text;
    EXPECT_NE(sub.body["error"]["message"].get<std::string>().find("needs role runner or admin"), std::string::npos)
        << sub.text;
    EXPECT_EQ(Api(server_->port(), kViewerToken).post("/v1/jobs", ddp_job("by-victor")).status, 403);
    // A config and a command at once is not a job.
    Json both = ddp_job("both");
    both["config"] = "tiny";
    auto r = Api(server_->port(), kRunnerToken).post("/v1/jobs", both);
    EXPECT_EQ(r.status, 400) << r.text;
    EXPECT_EQ(r.body["error"]["field"], "config") << r.text;
    Json bad = ddp_job("bad-cmd");
    bad["command"] = Json::array({"python3", 3});
    r = Api(server_->port(), kRunnerToken).post("/v1/jobs", bad);
    EXPECT_EQ(r.status, 400) << r.text;
    EXPECT_EQ(r.body["error"]["field"], "command[1]") << r.text;
    // resume_from continues a training job's checkpoint with `train --resume auto`; a command job has none to
    // continue, so the field is refused by name rather than checked against the store and ignored.
    Json resumed = ddp_job("resumed");
    resumed["resume_from"] = 1;
    r = Api(server_->port(), kRunnerToken).post("/v1/jobs", resumed);
    EXPECT_EQ(r.status, 400) << r.text;
    EXPECT_EQ(r.body["error"]["field"], "resume_from") << r.text;
    EXPECT_NE(r.body["error"]["message"].get<std::string>().find("command job"), std::string::npos) << r.text;
    // The local executor runs on this machine: an image would be ignored, so it is refused.
    Json img = ddp_job("img");
    img["image"] = "registry/team/train:1.2";
    r = Api(server_->port(), kRunnerToken).post("/v1/jobs", img);
    EXPECT_EQ(r.status, 400) << r.text;
    EXPECT_EQ(r.body["error"]["field"], "image") << r.text;
}

TEST_F(CommandJobTest, AServerWithoutAllowCommandJobsRefusesEveryToken) {
    server_ = std::make_unique<ServeProcess>(root_ / "srv", std::vector<std::string>{});
    for (const char* token : {kRunnerToken, kAdminToken}) {
        auto r = Api(server_->port(), token).post("/v1/jobs", ddp_job("refused"));
        EXPECT_EQ(r.status, 403) << r.text;
        EXPECT_EQ(r.body["error"]["code"], "command_jobs_disabled") << r.text;
        EXPECT_NE(r.body["error"]["message"].get<std::string>().find("--allow-command-jobs"), std::string::npos)
            << r.text;
    }
    EXPECT_EQ(Api(server_->port(), kRunnerToken).get("/v1/jobs").body["jobs"].size(), 0u);
}

}  // namespace
