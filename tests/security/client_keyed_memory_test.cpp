// Server memory that a viewer's requests could grow, replayed against a real `llmtrain serve`: each
// structure keyed or sized by client input is driven past its bound and the server's peak RSS grows by
// less than the 64 MB (docs/security.md "Memory keyed by client input" lists them all):
//  - the job store's prepared statements: list requests with every `limit` from 1 to 500 in five
//    shapes (a statement per SQL text and connection, ~17 KB each for these: +40 MB when the limit
//    was written into the SQL; 12 shapes on 4 read connections could hold a GB);
//  - the metrics index and its answers: two 4-million-line metrics.jsonl files (the shape a job with
//    trainer.max_steps in the millions writes) polled from the start: an index entry per line and an
//    answer of every line took +4.3 GB or more;
//  - the result cache: 64 jobs' summary.json with a 1.5 MB string each (the cache keeps every scalar),
//    listed: +101 MB when only the number of entries was bounded;
//  - the scheduler's waiting jobs: 100 queued jobs of one submitter, each with a 900 KB override
//    value: +200 MB (config, resolved YAML and overrides of every row) when it held whole rows; their
//    list of 500 rows carries no config.
#include <fstream>
#include <memory>
#include <string>

#include "security/held_label_server.h"
#include "security/raw_http.h"
#include "server/server_fixture.h"

namespace {

using namespace llmt::testing;

class ClientKeyedMemoryTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        root_ = fs::temp_directory_path() / ("llmt_security_keyed_" + std::to_string(::getpid()));
        fs::remove_all(root_);
        fs::create_directories(root_);
        // No job runs (team=held jobs stay queued): the test writes the jobs' metrics itself.
        server_ = serve_with_held_label(root_);
    }
    static void TearDownTestSuite() {
        if (server_) {
            Api admin(server_->port(), kAdminToken);
            cancel_jobs(admin, {"queued"});
        }
        server_.reset();
        fs::remove_all(root_);
    }
    static int64_t held_job() {
        Api bob(server_->port(), kSubmitterToken);
        auto r = bob.post(
            "/v1/jobs", nlohmann::json{{"name", "held"}, {"config", "gpt2_tiny_cpu"}, {"labels", {{"team", "held"}}}});
        EXPECT_EQ(r.status, 201) << r.text;
        return r.body.value("id", int64_t{-1});
    }
    static Http admin_list(int limit) {
        Api admin(server_->port(), kAdminToken, 120);
        return admin.get("/v1/jobs?limit=" + std::to_string(limit));
    }
    static fs::path run_dir(int64_t id) {
        return root_ / "srv/data/jobs" / std::to_string(id) / "runs" / ("job-" + std::to_string(id));
    }
    static inline fs::path root_;
    static inline std::unique_ptr<ServeProcess> server_;
};

TEST_F(ClientKeyedMemoryTest, ListLimitsDoNotGrowPreparedStatements) {
    held_job();
    Api victor(server_->port(), kViewerToken);
    ASSERT_EQ(victor.get("/v1/jobs?limit=7").status, 200);  // warm: the readers' first statements
    const int64_t before = vm_hwm_kb(server_->pid());
    for (int limit = 1; limit <= 500; ++limit)
        for (const char* shape :
             {"", "&order=desc", "&state=queued", "&order=desc&before=1000000", "&label=team%3Dheld"}) {
            auto r = victor.get("/v1/jobs?limit=" + std::to_string(limit) + shape);
            ASSERT_EQ(r.status, 200) << r.text.substr(0, 300);
            ASSERT_EQ(r.body["jobs"].size(), 1u);
        }
    // 2,500 list requests answer a row each: a few MB of transient answers at most.
    EXPECT_LT(vm_hwm_kb(server_->pid()) - before, 16 << 10) << "KB of peak RSS growth";
}

TEST_F(ClientKeyedMemoryTest, HugeMetricsFilesAreIndexedAndServedBoundedly) {
    constexpr int64_t kLines = 4000000;  // ~64 MB of short lines per file
    std::vector<std::pair<int64_t, fs::path>> files;
    for (int f = 0; f < 2; ++f) {
        const int64_t id = held_job();
        fs::create_directories(run_dir(id));
        std::ofstream m(run_dir(id) / "metrics.jsonl", std::ios::binary);
        std::string block;
        for (int64_t step = 1; step <= kLines; ++step) {
            block += "{\"step\":" + std::to_string(step) + ",\"loss\":1}\n";
            if (block.size() > (1u << 20)) m << block, block.clear();
        }
        m << block;
        files.emplace_back(id, run_dir(id) / "metrics.jsonl");
    }
    Api victor(server_->port(), kViewerToken, 120);
    ASSERT_EQ(victor.get("/v1/jobs/1/metrics?since_step=0").status, 200);  // warm
    const int64_t before = vm_hwm_kb(server_->pid());
    for (const auto& [id, file] : files) {
        const std::string url = "/v1/jobs/" + std::to_string(id) + "/metrics";
        // From the start: the first 10,000 lines, marked truncated; the next page follows last_step.
        auto first = victor.get(url);
        ASSERT_EQ(first.status, 200) << first.text.substr(0, 300);
        EXPECT_EQ(first.body["points"].size(), 10000u);  // not fatal: the peak RSS below is the finding
        EXPECT_EQ(first.body["points"][0]["step"], 1);
        EXPECT_EQ(first.body["last_step"], 10000);
        EXPECT_EQ(first.body["truncated"], true);
        auto next = victor.get(url + "?since_step=10000");
        EXPECT_EQ(next.body["points"].size(), 10000u);
        EXPECT_EQ(next.body["points"][0]["step"], 10001);
        // Anywhere in the file (the index merged its ranges), and the end.
        auto middle = victor.get(url + "?since_step=2345677");
        EXPECT_EQ(middle.body["points"].size(), 10000u);
        EXPECT_EQ(middle.body["points"][0]["step"], 2345678);
        auto tail = victor.get(url + "?since_step=" + std::to_string(kLines - 3));
        ASSERT_EQ(tail.body["points"].size(), 3u) << tail.text.substr(0, 300);
        EXPECT_EQ(tail.body["last_step"], kLines);
        EXPECT_EQ(tail.body["truncated"], false);
        // Lines appended later are served after the merged ranges.
        std::ofstream(file, std::ios::binary | std::ios::app) << "{\"step\":" << kLines + 1 << ",\"loss\":0.5}\n";
        auto appended = victor.get(url + "?since_step=" + std::to_string(kLines));
        ASSERT_EQ(appended.body["points"].size(), 1u) << appended.text.substr(0, 300);
        EXPECT_EQ(appended.body["points"][0]["loss"], 0.5);
    }
    EXPECT_LT(vm_hwm_kb(server_->pid()) - before, kMaxRssGrowthKb) << "KB of peak RSS growth";
    EXPECT_EQ(probe(server_->port(), "/healthz"), 200);
}

TEST_F(ClientKeyedMemoryTest, SummariesAreCachedBoundedly) {
    constexpr int kJobs = 64;
    for (int i = 0; i < kJobs; ++i) {
        const int64_t id = held_job();
        fs::create_directories(run_dir(id));
        std::ofstream(run_dir(id) / "summary.json")
            << "{\"final_train_loss\": 1.5, \"note\": \"" << std::string(1500000, 'n') << i << "\"}";
    }
    Api victor(server_->port(), kViewerToken, 120);
    const int64_t before = vm_hwm_kb(server_->pid());
    for (int round = 0; round < 2; ++round) {
        auto list = victor.get("/v1/jobs?limit=500");
        ASSERT_EQ(list.status, 200) << list.text.substr(0, 300);
        int with_result = 0;
        for (const auto& j : list.body["jobs"])
            with_result += j["result"].is_object() && j["result"].value("final_train_loss", 0.0) == 1.5;
        EXPECT_EQ(with_result, kJobs);
    }
    EXPECT_LT(vm_hwm_kb(server_->pid()) - before, kMaxRssGrowthKb) << "KB of peak RSS growth";
}

TEST_F(ClientKeyedMemoryTest, QueuedJobsWithLargeConfigsAreNotHeldByTheScheduler) {
    constexpr int kJobs = 100;
    Api bob(server_->port(), kSubmitterToken, 120);
    auto body = [](int i) {
        return nlohmann::json{
            {"name", "big"},
            {"config", "gpt2_tiny_cpu"},
            {"labels", {{"team", "held"}}},
            {"overrides", {{"tracking.mlflow.run_name", std::string(900000, 'r') + std::to_string(i)}}}};
    };
    ASSERT_EQ(bob.post("/v1/jobs", body(-1)).status, 201);  // warm: the submit path's buffers
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const int64_t before = vm_hwm_kb(server_->pid());
    for (int i = 0; i < kJobs; ++i) {
        auto r = bob.post("/v1/jobs", body(i));
        ASSERT_EQ(r.status, 201) << r.text.substr(0, 300);
    }
    // The scheduler has looked at the queue (it does every 0.25 s) and holds every waiting job.
    std::this_thread::sleep_for(std::chrono::seconds(2));
    EXPECT_LT(vm_hwm_kb(server_->pid()) - before, kMaxRssGrowthKb) << "KB of peak RSS growth";
    // The list never carries configs: 500 rows of these jobs is a few hundred bytes each (the finding:
    // `GET /v1/jobs?limit=500` with 0.9 MB configs took 1.1 s and 80 MB).
    auto list = admin_list(500);
    EXPECT_EQ(list.status, 200);
    EXPECT_LT(list.text.size(), 500u * 1024) << "bytes of a 500-row list";
    EXPECT_EQ(list.text.find(std::string(1000, 'r')), std::string::npos);
    // The rows keep their whole configs (a start reads the row again; the detail reads it too).
    Api admin(server_->port(), kAdminToken);
    auto one = admin.get("/v1/jobs?state=queued&limit=1&order=desc");
    ASSERT_EQ(one.body["jobs"].size(), 1u);
    auto detail = admin.get("/v1/jobs/" + one.body["jobs"][0]["id"].dump());
    EXPECT_NE(detail.text.find(std::string(1000, 'r')), std::string::npos);
}

}  // namespace
