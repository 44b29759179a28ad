// The control plane end to end: a real `llmtrain serve` on loopback, real SQLite, real `llmtrain train`
// children. Submit -> success -> metrics/logs/artifacts served; cancel of a running job -> checkpoint
// and state cancelled; who may cancel.
#include <sstream>

#include "server_fixture.h"

namespace {

namespace fs = std::filesystem;
using namespace llmt::testing;

class ApiTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        root_ = fs::temp_directory_path() / ("llmt_api_" + std::to_string(::getpid()));
        shards_ = prepare_shards(root_);
        server_ = new ServeProcess(root_ / "srv", {"--capacity", "cpus=2,gpus=0"});
    }
    static void TearDownTestSuite() {
        // A failed test may leave a long job running: stop it through the API before the server goes.
        Api admin(server_->port(), kAdminToken);
        cancel_jobs(admin, {"running"});
        delete server_;
        fs::remove_all(root_);
    }
    static nlohmann::json job(Api& api, int64_t id) { return api.get("/v1/jobs/" + std::to_string(id)).body; }
    static bool reaches(Api& api, int64_t id, const std::string& state, double timeout_s) {
        return wait_for([&] { return job(api, id).value("state", "") == state; }, timeout_s);
    }
    static fs::path root_, shards_;
    static ServeProcess* server_;
};
fs::path ApiTest::root_, ApiTest::shards_;
ServeProcess* ApiTest::server_ = nullptr;

TEST_F(ApiTest, SubmitRunsToSuccessAndServesMetricsLogsArtifacts) {
    Api api(server_->port(), kSubmitterToken);
    auto r = api.post("/v1/jobs", nlohmann::json{{"name", "tiny-ok"},
                                                 {"config", tiny_config(shards_, 8, 4)},
                                                 {"labels", {{"team", "nlp"}}}});
    ASSERT_EQ(r.status, 201) << r.text;
    EXPECT_EQ(r.body["state"], "queued");
    // The repository's configs/throughput.jsonl has CPU rows, which the server finds beside the binary.
    EXPECT_EQ(r.body["estimate"]["source"], "measured") << r.body["estimate"].dump(2);
    EXPECT_FALSE(r.body["estimate"]["rows_used"].empty());
    EXPECT_GT(r.body["estimate"]["duration_s"].get<double>(), 0);
    int64_t id = r.body["id"];
    ASSERT_TRUE(reaches(api, id, "succeeded", 300)) << job(api, id).dump(2) << server_->log();

    auto j = job(api, id);
    EXPECT_EQ(j["attempts"], 1);
    EXPECT_EQ(j["exit_code"], 0);
    EXPECT_EQ(j["submitted_by"], "bob");
    std::vector<std::string> states;
    for (const auto& e : j["history"]) states.push_back(e["state"]);
    EXPECT_EQ(states.front(), "queued");
    EXPECT_EQ(states.back(), "succeeded");
    EXPECT_NE(std::find(states.begin(), states.end(), "running"), states.end());
    EXPECT_EQ(j["latest_metrics"]["step"], 8);
    EXPECT_EQ(j["progress"]["max_steps"], 8);
    ASSERT_EQ(j["ranks"].size(), 1u);
    EXPECT_GT(j["actual"]["wall_s"].get<double>(), 0.0);

    // Metrics: every step once, and since_step filters.
    auto m = api.get("/v1/jobs/" + std::to_string(id) + "/metrics");
    ASSERT_EQ(m.status, 200) << m.text;
    std::vector<int> steps;
    for (const auto& p : m.body["points"])
        if (p.contains("loss")) steps.push_back(p["step"]);
    EXPECT_EQ(steps, (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8}));
    auto m5 = api.get("/v1/jobs/" + std::to_string(id) + "/metrics?since_step=5");
    for (const auto& p : m5.body["points"]) EXPECT_GT(p["step"].get<int>(), 5);
    EXPECT_EQ(m5.body["last_step"], 8);

    // Logs: the attempt header, the tail, and a follow on a finished job ends by itself.
    auto lg = api.get("/v1/jobs/" + std::to_string(id) + "/logs?rank=0");
    ASSERT_EQ(lg.status, 200);
    EXPECT_NE(lg.text.find("=== llmtrain serve: job " + std::to_string(id) + " attempt 1"), std::string::npos)
        << lg.text;
    auto t1 = api.get("/v1/jobs/" + std::to_string(id) + "/logs?tail=1");
    EXPECT_EQ(std::count(t1.text.begin(), t1.text.end(), '\n'), 1) << t1.text;
    auto fol = api.get("/v1/jobs/" + std::to_string(id) + "/logs?follow=true");
    EXPECT_EQ(fol.status, 200);
    EXPECT_EQ(fol.text, lg.text);
    EXPECT_EQ(api.get("/v1/jobs/" + std::to_string(id) + "/logs?rank=1").status, 400);

    // Artifacts: listed, and downloaded byte for byte.
    auto a = api.get("/v1/jobs/" + std::to_string(id) + "/artifacts");
    ASSERT_EQ(a.status, 200);
    std::map<std::string, uint64_t> files;
    for (const auto& f : a.body["files"]) files[f["path"]] = f["size"];
    ASSERT_TRUE(files.count("summary.json")) << a.text;
    ASSERT_TRUE(files.count("checkpoints/step_8/model.safetensors")) << a.text;
    EXPECT_TRUE(files.count("checkpoints/step_4/model.safetensors")) << a.text;
    auto s = api.get("/v1/jobs/" + std::to_string(id) + "/artifacts/summary.json");
    ASSERT_EQ(s.status, 200);
    EXPECT_EQ(s.body["steps"], 8);
    auto w = api.get("/v1/jobs/" + std::to_string(id) + "/artifacts/checkpoints/step_8/model.safetensors");
    ASSERT_EQ(w.status, 200);
    EXPECT_EQ(w.text.size(), files["checkpoints/step_8/model.safetensors"]);
    auto run = root_ / "srv/data/jobs" / std::to_string(id) / "runs" / ("job-" + std::to_string(id));
    EXPECT_EQ(w.text, llmt::read_file(run / "checkpoints/step_8/model.safetensors"));
    // Paths that leave the run directory are refused.
    for (const char* bad :
         {"../config.yaml", "checkpoints/../../config.yaml", "%2e%2e/config.yaml", "..%2F..%2Fjobs.sqlite"}) {
        auto b = api.get("/v1/jobs/" + std::to_string(id) + "/artifacts/" + bad);
        EXPECT_TRUE(b.status == 400 || b.status == 404) << bad << " -> " << b.status << " " << b.text;
        EXPECT_TRUE(b.body.contains("error")) << bad;
    }

    // Filtering and the Prometheus endpoint (no token needed).
    auto l = api.get("/v1/jobs?state=succeeded&label=team%3Dnlp");
    ASSERT_EQ(l.status, 200);
    bool listed = false;
    for (const auto& x : l.body["jobs"]) listed = listed || x["id"] == id;
    EXPECT_TRUE(listed) << l.text;
    EXPECT_EQ(api.get("/v1/jobs?label=team%3Dcv").body["jobs"].size(), 0u);
    Api anon(server_->port(), "");
    auto prom = anon.get("/metrics");
    ASSERT_EQ(prom.status, 200);
    EXPECT_NE(prom.text.find("llmtrain_queue_depth "), std::string::npos);
    EXPECT_NE(prom.text.find("llmtrain_jobs{state=\"succeeded\"}"), std::string::npos);
    EXPECT_NE(
        prom.text.find("llmtrain_api_request_duration_seconds_bucket{route=\"/v1/jobs\",method=\"POST\",le=\"+Inf\"}"),
        std::string::npos)
        << prom.text;
    EXPECT_EQ(anon.get("/healthz").status, 200);
}

TEST_F(ApiTest, CancelRunningJobCheckpointsAndEndsCancelled) {
    Api bob(server_->port(), kSubmitterToken);
    auto r = bob.post("/v1/jobs", nlohmann::json{{"name", "long-one"}, {"config", tiny_config(shards_, 1000000)}});
    ASSERT_EQ(r.status, 201) << r.text;
    int64_t id = r.body["id"];
    ASSERT_TRUE(wait_for([&] {
        auto j = job(bob, id);
        return j["state"] == "running" && j["latest_metrics"].is_object() &&
               j["latest_metrics"]["step"].get<int>() >= 2;
    }, 300)) << job(bob, id).dump(2);

    // Someone else's job: another submitter and a viewer may not cancel it.
    Api carol(server_->port(), kOtherSubmitterToken), victor(server_->port(), kViewerToken);
    EXPECT_EQ(carol.post("/v1/jobs/" + std::to_string(id) + "/cancel", "").status, 403);
    EXPECT_EQ(victor.post("/v1/jobs/" + std::to_string(id) + "/cancel", "").status, 403);

    auto c = bob.post("/v1/jobs/" + std::to_string(id) + "/cancel", "");
    ASSERT_EQ(c.status, 202) << c.text;
    EXPECT_TRUE(c.body["cancel_requested"].get<bool>());
    ASSERT_TRUE(reaches(bob, id, "cancelled", 120)) << job(bob, id).dump(2);
    auto j = job(bob, id);
    EXPECT_EQ(j["exit_code"], 143) << j.dump(2);  // the trainer's graceful SIGTERM exit, not SIGKILL
    EXPECT_EQ(j["attempts"], 1);
    auto a = bob.get("/v1/jobs/" + std::to_string(id) + "/artifacts");
    bool checkpoint = false;
    for (const auto& f : a.body["files"])
        checkpoint = checkpoint || f["path"].get<std::string>().find("model.safetensors") != std::string::npos;
    EXPECT_TRUE(checkpoint) << a.text;
    // Cancelling again is a conflict, not a silent success.
    EXPECT_EQ(bob.post("/v1/jobs/" + std::to_string(id) + "/cancel", "").status, 409);
}

TEST_F(ApiTest, BadInputJobFailsWithoutRetry) {
    // Valid config, missing data: the trainer exits 2 (bad input), which is never retried.
    Api bob(server_->port(), kSubmitterToken);
    std::string cfg = tiny_config(root_ / "no-such-shards", 4);
    auto r = bob.post("/v1/jobs", nlohmann::json{{"name", "no-data"}, {"config", cfg}});
    ASSERT_EQ(r.status, 201) << r.text;
    int64_t id = r.body["id"];
    ASSERT_TRUE(reaches(bob, id, "failed", 120)) << job(bob, id).dump(2);
    auto j = job(bob, id);
    EXPECT_EQ(j["exit_code"], 2);
    EXPECT_EQ(j["attempts"], 1);
    EXPECT_NE(j["reason"].get<std::string>().find("bad input"), std::string::npos) << j.dump(2);
}

TEST_F(ApiTest, TwoRanksRunThroughTheLauncherWithPerRankLogs) {
    Api bob(server_->port(), kSubmitterToken);
    auto r = bob.post("/v1/jobs", nlohmann::json{{"name", "ddp-two"},
                                                 {"config", tiny_config(shards_, 4)},
                                                 {"overrides", {{"dist.backend", "gloo"}}},
                                                 {"nproc_per_node", 2}});
    ASSERT_EQ(r.status, 201) << r.text;
    int64_t id = r.body["id"];
    ASSERT_TRUE(reaches(bob, id, "succeeded", 300)) << job(bob, id).dump(2);
    auto j = job(bob, id);
    ASSERT_EQ(j["ranks"].size(), 2u);
    for (int rank : {0, 1}) {
        auto lg = bob.get("/v1/jobs/" + std::to_string(id) + "/logs?rank=" + std::to_string(rank));
        ASSERT_EQ(lg.status, 200);
        ASSERT_FALSE(lg.text.empty()) << "rank " << rank;
        std::istringstream in(lg.text);
        std::string line, want = "[rank " + std::to_string(rank) + "] ";
        while (std::getline(in, line)) EXPECT_EQ(line.rfind(want, 0), 0u) << line;
    }
    EXPECT_EQ(bob.get("/v1/jobs/" + std::to_string(id) + "/logs?rank=2").status, 400);
    auto m = bob.get("/v1/jobs/" + std::to_string(id) + "/metrics");
    EXPECT_EQ(m.body["last_step"], 4);
}

}  // namespace
