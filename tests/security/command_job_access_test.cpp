// Command jobs (server/jobs/command_job.h) against the security policy (docs/security.md "Command jobs"): the
// program's environment has none of the server's secrets and no token, its working directory and HOME are
// its own job directory, its outputs land in its run directory; only runner/admin tokens of a server
// started with --allow-command-jobs get one in, and a submitter cannot smuggle a command into a training
// job.
#include "server/server_fixture.h"

namespace {

namespace fs = std::filesystem;
using namespace llmt::testing;
using Json = nlohmann::json;

class CommandJobAccessTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        root_ = fs::temp_directory_path() / ("llmt_sec_command_" + std::to_string(::getpid()));
        fs::remove_all(root_);
        // A secret in the server's environment that no job may see.
        ::setenv("AWS_SECRET_ACCESS_KEY", "llmt_env_secret_0123456789", 1);
        server_ = new ServeProcess(root_ / "srv", {"--allow-command-jobs", "--capacity", "cpus=1,gpus=0"});
        ::unsetenv("AWS_SECRET_ACCESS_KEY");
    }
    static void TearDownTestSuite() {
        if (server_) {
            Api admin(server_->port(), kAdminToken);
            cancel_jobs(admin, {"queued", "running"});
        }
        delete server_;
        fs::remove_all(root_);
    }
    static fs::path root_;
    static ServeProcess* server_;
};
fs::path CommandJobAccessTest::root_;
ServeProcess* CommandJobAccessTest::server_ = nullptr;

TEST_F(CommandJobAccessTest, TheProgramSeesNoSecretNoTokenAndRunsInItsOwnDirectory) {
    Api rita(server_->port(), kRunnerToken);
    auto r = rita.post("/v1/jobs", Json{{"name", "env-probe"},
                                        {"command", {"/bin/sh", "-c",
                                                     "env > \"$LLMTRAIN_OUTPUT_DIR/env.txt\"; pwd > "
                                                     "\"$LLMTRAIN_OUTPUT_DIR/pwd.txt\""}},
                                        {"max_retries", 0}});
    ASSERT_EQ(r.status, 201) << r.text;
    const std::string id = std::to_string(r.body["id"].get<int64_t>());
    ASSERT_TRUE(wait_for([&] {
        const std::string st = rita.get("/v1/jobs/" + id).body.value("state", "");
        return st == "succeeded" || st == "failed";
    }, 120)) << server_->log();
    ASSERT_EQ(rita.get("/v1/jobs/" + id).body["state"], "succeeded") << server_->log();
    const fs::path job_dir = fs::canonical(root_ / "srv/data/jobs" / id);
    const fs::path run_dir = job_dir / "runs" / ("job-" + id);

    auto env = rita.get("/v1/jobs/" + id + "/artifacts/env.txt");
    ASSERT_EQ(env.status, 200) << env.text;
    EXPECT_EQ(env.text.find("llmt_env_secret"), std::string::npos) << env.text;
    for (const char* token : {kAdminToken, kSubmitterToken, kRunnerToken, kViewerToken, kOtherSubmitterToken})
        EXPECT_EQ(env.text.find(token), std::string::npos) << "a token reached the job's environment";
    EXPECT_NE(env.text.find("HOME=" + job_dir.string() + "\n"), std::string::npos) << env.text;
    EXPECT_NE(env.text.find("LLMTRAIN_OUTPUT_DIR=" + run_dir.string() + "\n"), std::string::npos) << env.text;
    EXPECT_NE(env.text.find("LLMTRAIN_METRICS_FILE=" + (run_dir / "metrics.jsonl").string() + "\n"),
              std::string::npos);
    EXPECT_NE(env.text.find("TORCHELASTIC_RUN_ID="), std::string::npos) << "run by llmtrain launch: " << env.text;
    auto pwd = rita.get("/v1/jobs/" + id + "/artifacts/pwd.txt");
    EXPECT_EQ(pwd.text, job_dir.string() + "\n");
}

TEST_F(CommandJobAccessTest, OnlyRunnerAndAdminTokensAndNoCommandInsideATrainingJob) {
    const Json job = {{"name", "probe"}, {"command", {"/bin/true"}}};
    EXPECT_EQ(Api(server_->port(), kSubmitterToken).post("/v1/jobs", job).status, 403);
    EXPECT_EQ(Api(server_->port(), kViewerToken).post("/v1/jobs", job).status, 403);
    EXPECT_EQ(Api(server_->port(), "").post("/v1/jobs", job).status, 401);
    auto admin = Api(server_->port(), kAdminToken).post("/v1/jobs", job);
    EXPECT_EQ(admin.status, 201) << admin.text;
    // A training job's config cannot carry a command, and a command job cannot carry a config.
    Json mixed = {{"name", "mixed"}, {"config", "tiny"}, {"command", {"/bin/true"}}};
    auto r = Api(server_->port(), kSubmitterToken).post("/v1/jobs", mixed);
    EXPECT_EQ(r.status, 400) << r.text;
    // The submitter's token did not reach the program through an error either.
    EXPECT_EQ(r.text.find(kSubmitterToken), std::string::npos);
}

}  // namespace
