// Restart safety: kill -9 the server while one job runs and another waits (capacity for one). The
// restarted server re-attaches to the running attempt (never starts it again), the waiting job then
// runs, both succeed, and every training step of each ran exactly once.
#include <numeric>
#include <sstream>

#include "server_fixture.h"

namespace {

namespace fs = std::filesystem;
using namespace llmt::testing;

std::vector<int> loss_steps(const fs::path& metrics) {
    std::vector<int> steps;
    std::istringstream in(llmt::read_file(metrics));
    std::string line;
    while (std::getline(in, line)) {
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_object() && j.contains("loss")) steps.push_back(j["step"]);
    }
    return steps;
}

TEST(CrashTest, KillNineWithRunningAndQueuedJobLosesNothingAndRunsNothingTwice) {
    fs::path root = fs::temp_directory_path() / ("llmt_crash_" + std::to_string(::getpid()));
    fs::path shards = prepare_shards(root);
    // Long enough to still be running when the server dies, short enough for a test.
    const int kStepsA = 1000,
              kStepsB = 5;  // A must outlive the server's restart (~4 s at 150 steps on an idle machine)
    int64_t a = 0, b = 0;
    {
        ServeProcess srv(root / "srv", {"--capacity", "cpus=1,gpus=0"});
        Api api(srv.port(), kSubmitterToken);
        auto ra = api.post("/v1/jobs", nlohmann::json{{"name", "job-a"}, {"config", tiny_config(shards, kStepsA)}});
        ASSERT_EQ(ra.status, 201) << ra.text;
        a = ra.body["id"];
        ASSERT_TRUE(wait_for([&] {
            auto j = api.get("/v1/jobs/" + std::to_string(a)).body;
            return j["state"] == "running" && j["latest_metrics"].is_object();
        }, 300));
        auto rb = api.post("/v1/jobs", nlohmann::json{{"name", "job-b"}, {"config", tiny_config(shards, kStepsB)}});
        ASSERT_EQ(rb.status, 201) << rb.text;
        b = rb.body["id"];
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        EXPECT_EQ(api.get("/v1/jobs/" + std::to_string(b)).body["state"], "queued");
        srv.kill9();
    }
    auto handle_dir = root / "srv/data/jobs" / std::to_string(a) / "attempts/1";
    EXPECT_FALSE(fs::exists(handle_dir / "exit_code")) << "job A finished before the kill; raise kStepsA";

    ServeProcess srv(root / "srv", {"--capacity", "cpus=1,gpus=0"});
    Api api(srv.port(), kViewerToken);
    auto state = [&](int64_t id) { return api.get("/v1/jobs/" + std::to_string(id)).body.value("state", ""); };
    ASSERT_TRUE(wait_for([&] { return state(a) == "succeeded" && state(b) == "succeeded"; }, 600))
        << api.get("/v1/jobs/" + std::to_string(a)).text << "\n"
        << api.get("/v1/jobs/" + std::to_string(b)).text << "\n"
        << srv.log();
    auto ja = api.get("/v1/jobs/" + std::to_string(a)).body, jb = api.get("/v1/jobs/" + std::to_string(b)).body;
    EXPECT_EQ(ja["attempts"], 1) << ja.dump(2);
    EXPECT_EQ(jb["attempts"], 1) << jb.dump(2);
    bool reattached = false;
    for (const auto& e : ja["history"])
        reattached = reattached || e["detail"].get<std::string>().find("re-attached") == 0;
    EXPECT_TRUE(reattached) << ja.dump(2);
    // B started only after A finished (capacity 1): its first running entry is after A's success.
    double a_done = 0, b_start = 0;
    for (const auto& e : ja["history"])
        if (e["state"] == "succeeded") a_done = e["at"];
    for (const auto& e : jb["history"])
        if (e["state"] == "running" && b_start == 0) b_start = e["at"];
    EXPECT_GE(b_start, a_done);
    // Every step exactly once, in order: nothing ran twice.
    auto run = [&](int64_t id) {
        return root / "srv/data/jobs" / std::to_string(id) / "runs" / ("job-" + std::to_string(id)) / "metrics.jsonl";
    };
    std::vector<int> want_a(kStepsA), want_b(kStepsB);
    std::iota(want_a.begin(), want_a.end(), 1);
    std::iota(want_b.begin(), want_b.end(), 1);
    EXPECT_EQ(loss_steps(run(a)), want_a);
    EXPECT_EQ(loss_steps(run(b)), want_b);
    // One trainer start per job in the logs.
    for (int64_t id : {a, b}) {
        std::string log = llmt::read_file(root / "srv/data/jobs" / std::to_string(id) / "logs/job.log");
        size_t starts = 0;
        for (size_t p = log.find("=== llmtrain serve: job"); p != std::string::npos;
             p = log.find("=== llmtrain serve: job", p + 1))
            ++starts;
        EXPECT_EQ(starts, 1u) << log;
    }
    fs::remove_all(root);
}

}  // namespace
