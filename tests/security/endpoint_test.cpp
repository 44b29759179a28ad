// Tracking endpoints under the job access policy (docs/security.md), against a real `llmtrain serve` on
// loopback: a job connects only to the endpoints the operator allows (`serve --allow-endpoint URL_PREFIX`,
// repeatable). A submit whose tracking.mlflow.uri names another server is refused 400 naming the key, before
// anything runs; an MLflow file store (a path or file: URI) is a write path, placed in the job's own
// directory; a bad --allow-endpoint stops the server at start. docs/security.md.
#include "server/server_fixture.h"

namespace {

namespace fs = std::filesystem;
using namespace llmt::testing;
using Json = nlohmann::json;

class EndpointTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        root_ = fs::temp_directory_path() / ("llmt_sec_endpoint_" + std::to_string(::getpid()));
        fs::remove_all(root_);
        server_ =
            new ServeProcess(root_ / "srv", {"--capacity", "cpus=1,gpus=0", "--allow-endpoint",
                                             "http://127.0.0.1:9/mlflow", "--allow-endpoint", "https://mlflow.example",
                                             "--allow-endpoint", "s3://team-bucket/runs"});
    }
    static void TearDownTestSuite() {
        if (server_) {
            Api admin(server_->port(), kAdminToken);
            cancel_jobs(admin, {"queued", "running"});
        }
        delete server_;
        fs::remove_all(root_);
    }
    static Json job(const std::string& uri) {
        Json j = {{"name", "ep"}, {"config", "gpt2_tiny_cpu"}};
        j["overrides"] = {{"tracking.mlflow.uri", uri}, {"trainer.max_steps", 30}};
        return j;
    }
    static void expect_refused(const Http& r) {
        EXPECT_EQ(r.status, 400) << r.text;
        ASSERT_TRUE(r.body.is_object() && r.body.contains("error")) << r.text;
        EXPECT_EQ(r.body["error"]["code"], "path_not_allowed") << r.text;
        EXPECT_EQ(r.body["error"]["field"], "tracking.mlflow.uri") << r.text;
    }
    static fs::path root_;
    static ServeProcess* server_;
};
fs::path EndpointTest::root_;
ServeProcess* EndpointTest::server_ = nullptr;

TEST_F(EndpointTest, OnlyTheAllowedTrackingServersAndTheJobsOwnDirectory) {
    Api bob(server_->port(), kSubmitterToken);
    // Another server, a look-alike host, a prefix that continues past a boundary, and a file store outside
    // the job's directory.
    for (const std::string uri : {"http://mlflow.attacker.example", "https://mlflow.example.evil.net",
                                  "http://127.0.0.1:9/mlflowx", "http://127.0.0.1:99/mlflow", "file:///tmp/mlruns",
                                  "/tmp/mlruns", "../mlruns"}) {
        SCOPED_TRACE(uri);
        expect_refused(bob.post("/v1/jobs", job(uri)));
    }
    EXPECT_TRUE(fs::is_empty(root_ / "srv/data/jobs")) << "a refused submit created a job directory";
    // Under an allowed prefix, and a relative file store: accepted (then cancelled: nothing listens there).
    Api admin(server_->port(), kAdminToken);
    for (const std::string uri : {"http://127.0.0.1:9/mlflow", "https://mlflow.example/team-a", "file:mlruns"}) {
        SCOPED_TRACE(uri);
        auto r = bob.post("/v1/jobs", job(uri));
        EXPECT_EQ(r.status, 201) << r.text;
    }
    cancel_jobs(admin, {"queued", "running"});
}

// Object storage: output.sync names a bucket and prefix; only those under an allowed s3:// prefix pass.
TEST_F(EndpointTest, OnlyTheAllowedBucketPrefixesForOutputSync) {
    Api bob(server_->port(), kSubmitterToken);
    auto sync_job = [](const std::string& uri) {
        Json j = {{"name", "s3"}, {"config", "gpt2_tiny_cpu"}};
        j["overrides"] = {{"output.sync", uri}, {"trainer.max_steps", 30}};
        return j;
    };
    for (const std::string uri : {"s3://other-bucket/runs", "s3://team-bucket/runsx", "s3://team-bucket/other",
                                  "s3://team-bucket"}) {
        SCOPED_TRACE(uri);
        auto r = bob.post("/v1/jobs", sync_job(uri));
        EXPECT_EQ(r.status, 400) << r.text;
        ASSERT_TRUE(r.body.is_object() && r.body.contains("error")) << r.text;
        EXPECT_EQ(r.body["error"]["code"], "path_not_allowed") << r.text;
        EXPECT_EQ(r.body["error"]["field"], "output.sync") << r.text;
    }
    Api admin(server_->port(), kAdminToken);
    auto r = bob.post("/v1/jobs", sync_job("s3://team-bucket/runs/alice"));
    ASSERT_EQ(r.status, 201) << r.text;
    // The job detail links the synced run ("storage").
    const std::string id = r.body["id"].dump();
    auto d = bob.get("/v1/jobs/" + id);
    ASSERT_EQ(d.status, 200) << d.text;
    EXPECT_EQ(d.body["storage"]["sync_uri"], "s3://team-bucket/runs/alice/job-" + id) << d.text;
    EXPECT_EQ(d.body["storage"]["checkpoints_uri"], "s3://team-bucket/runs/alice/job-" + id + "/checkpoints/")
        << d.text;
    EXPECT_FALSE(d.body["storage"].contains("dataset_uri")) << d.text;
    cancel_jobs(admin, {"queued", "running"});
}

// model.init_from as an s3:// object under an allowed prefix is accepted at submit (the job fetches it
// when it starts); under another prefix it is refused naming the key, as any endpoint.
TEST_F(EndpointTest, AnAllowedS3InitFromIsAcceptedAtSubmit) {
    Api bob(server_->port(), kSubmitterToken);
    auto init_job = [](const std::string& uri) {
        Json j = {{"name", "s3init"}, {"config", "gpt2_tiny_cpu"}};
        j["overrides"] = {{"model.init_from", uri}, {"trainer.max_steps", 30}};
        return j;
    };
    auto refused = bob.post("/v1/jobs", init_job("s3://other-bucket/model"));
    EXPECT_EQ(refused.status, 400) << refused.text;
    ASSERT_TRUE(refused.body.is_object() && refused.body.contains("error")) << refused.text;
    EXPECT_EQ(refused.body["error"]["code"], "path_not_allowed") << refused.text;
    EXPECT_EQ(refused.body["error"]["field"], "model.init_from") << refused.text;
    auto estimate = bob.post("/v1/estimate", init_job("s3://team-bucket/runs/model"));
    EXPECT_EQ(estimate.status, 200) << estimate.text;
    auto r = bob.post("/v1/jobs", init_job("s3://team-bucket/runs/model"));
    EXPECT_EQ(r.status, 201) << r.text;
    Api admin(server_->port(), kAdminToken);
    cancel_jobs(admin, {"queued", "running"});
}

TEST(EndpointFlag, ABadAllowEndpointStopsTheServerAtStart) {
    const fs::path dir = fs::temp_directory_path() / ("llmt_sec_endpoint_flag_" + std::to_string(::getpid()));
    for (const std::string bad : {"ftp://mlflow.example", "mlflow.example", "https:///path", "s3://", "s3:///runs"}) {
        auto r = run_process({llmtrain_bin(), "serve", "--listen", "127.0.0.1:0", "--data-dir",
                              (dir / "data").string(), "--allow-endpoint", bad},
                             "", 60);
        EXPECT_EQ(r.exit_code, 2) << bad << "\n" << r.err;
        EXPECT_NE(r.err.find("--allow-endpoint"), std::string::npos) << r.err;
    }
    fs::remove_all(dir);
}

}  // namespace
