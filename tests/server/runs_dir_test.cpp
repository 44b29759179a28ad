// Indexed runs end to end (serve --runs-dir): a run trained with plain `llmtrain train` is listed by a
// real `llmtrain serve` with its result, metrics (incrementally, by step) and log; runs symlinked or
// with files symlinked out of the root show nothing of the outside; a half-written run and one without
// metrics are listed; pages follow next_after; the indexed folder is left unchanged; and the dashboard
// (tests/server/runs_dir.mjs in Debian's Chromium) lists the run and draws its loss curves.
#include <map>

#include "server_fixture.h"

namespace {

namespace fs = std::filesystem;
using namespace llmt::testing;

constexpr int kSteps = 8;

class RunsDirTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        root_ = fs::temp_directory_path() / ("llmt_runsdir_" + std::to_string(::getpid()));
        shards_ = prepare_shards(root_);
        runs_ = root_ / "runs";
        std::ofstream(root_ / "tiny.yaml") << tiny_config(shards_, kSteps);
        // Two runs with different learning rates, so the compared curves differ.
        for (const auto& [id, lr] :
             {std::pair<std::string, std::string>{"trained", "3.0e-3"}, {"trained-2", "1.0e-3"}}) {
            auto r = run_process({llmtrain_bin(), "train", "--config", (root_ / "tiny.yaml").string(), "--set",
                                  "output.root_dir=" + runs_.string(), "--set", "output.run_id=" + id,
                                  "--set", "trainer.eval_every_steps=4", "--set", "trainer.eval_steps=2",
                                  "--set", "trainer.lr=" + lr},
                                 "", 600);
            if (r.exit_code != 0) throw std::runtime_error(std::string("llmtrain train failed: ") + r.err);
        }
        // What else a folder of runs may hold.
        fs::create_directories(root_ / "outside");
        std::ofstream(root_ / "outside/secret.jsonl") << "{\"step\": 1, \"loss\": 123.0}\n";
        std::ofstream(root_ / "outside/meta.json") << "{\"secret\": true}\n";
        fs::create_directories(runs_ / "starting");  // half-written: config.yaml and a partial line
        std::ofstream(runs_ / "starting/config.yaml") << "run: {name: s}\n";
        std::ofstream(runs_ / "starting/metrics.jsonl") << "{\"step\": 1, \"loss\": 4.5}\n{\"step\": 2, \"lo";
        fs::create_directories(runs_ / "no-metrics");
        std::ofstream(runs_ / "no-metrics/meta.json") << "{\"run_id\": \"no-metrics\"}\n";
        fs::create_directories(runs_ / "escaping/logs");
        std::ofstream(runs_ / "escaping/config.yaml") << "run: {name: e}\n";
        fs::create_symlink(root_ / "outside/secret.jsonl", runs_ / "escaping/metrics.jsonl");
        fs::create_symlink(root_ / "outside/secret.jsonl", runs_ / "escaping/logs/rank0.log");
        fs::create_symlink(root_ / "outside", runs_ / "linked");
        server_ = new ServeProcess(root_ / "srv", {"--runs-dir", runs_.string(), "--runs-rescan-s", "0.5"});
    }
    static void TearDownTestSuite() {
        delete server_;
        fs::remove_all(root_);
    }
    // Every file under the runs folder with its size and mtime: the server must change none.
    static std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> listing() {
        std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> out;
        for (auto& e : fs::recursive_directory_iterator(runs_))
            if (e.is_regular_file() && !e.is_symlink()) out[e.path().string()] = {e.file_size(), e.last_write_time()};
        return out;
    }
    static fs::path root_, shards_, runs_;
    static ServeProcess* server_;
};
fs::path RunsDirTest::root_, RunsDirTest::shards_, RunsDirTest::runs_;
ServeProcess* RunsDirTest::server_ = nullptr;

TEST_F(RunsDirTest, ApiListsMetricsAndLogsOfRunsTrainedOutsideTheServerReadOnly) {
    const auto before = listing();
    Api anon(server_->port(), "");
    EXPECT_EQ(anon.get("/v1/runs").status, 401);
    EXPECT_EQ(anon.get("/v1/runs/0/trained/metrics").status, 401);
    Api viewer(server_->port(), kViewerToken);

    auto list = viewer.get("/v1/runs");
    ASSERT_EQ(list.status, 200) << list.text << server_->log();
    std::vector<std::string> ids;
    for (const auto& r : list.body["runs"]) ids.push_back(r["id"]);
    EXPECT_EQ(ids, (std::vector<std::string>{"0/escaping", "0/no-metrics", "0/starting", "0/trained", "0/trained-2"}))
        << list.text;
    EXPECT_EQ(list.body["roots"], nlohmann::json::array({"runs"}));
    for (const auto& r : list.body["runs"]) {
        if (r["id"] != "0/trained") continue;
        EXPECT_TRUE(r["has_metrics"]);
        EXPECT_TRUE(r["device"].is_string()) << r.dump();
        EXPECT_TRUE(r["result"]["final_train_loss"].is_number()) << r.dump();
        EXPECT_TRUE(r["start_time_utc"].is_string());
    }

    // Metrics: every logged step, then only what is new (nothing), as the job metrics route answers.
    auto m = viewer.get("/v1/runs/0/trained/metrics");
    ASSERT_EQ(m.status, 200) << m.text;
    int train_points = 0;
    for (const auto& p : m.body["points"]) train_points += p.contains("loss") ? 1 : 0;
    EXPECT_EQ(train_points, kSteps) << m.text;
    EXPECT_EQ(m.body["last_step"], kSteps);
    auto again = viewer.get("/v1/runs/0/trained/metrics?since_step=" + std::to_string(kSteps));
    EXPECT_TRUE(again.body["points"].empty()) << again.text;
    EXPECT_EQ(viewer.get("/v1/runs/0/trained/metrics?since_step=x").status, 400);

    auto detail = viewer.get("/v1/runs/0/trained");
    ASSERT_EQ(detail.status, 200) << detail.text;
    EXPECT_EQ(detail.body["ranks"], nlohmann::json::array({0}));
    EXPECT_NE(detail.body["config_yaml"].get<std::string>().find("max_steps"), std::string::npos);
    EXPECT_EQ(detail.body["meta"]["run_id"], "trained");
    auto log = viewer.get("/v1/runs/0/trained/logs?tail=5");
    ASSERT_EQ(log.status, 200) << log.text;
    EXPECT_FALSE(log.text.empty());
    EXPECT_LE(std::count(log.text.begin(), log.text.end(), '\n'), 5);
    EXPECT_EQ(viewer.get("/v1/runs/0/trained/logs?rank=3").status, 404);

    // A half-written run: the complete line only. A run without metrics: none, and no log.
    auto half = viewer.get("/v1/runs/0/starting/metrics");
    ASSERT_EQ(half.body["points"].size(), 1u) << half.text;
    EXPECT_EQ(half.body["last_step"], 1);
    EXPECT_TRUE(viewer.get("/v1/runs/0/starting").body["meta"].is_null());
    auto bare = viewer.get("/v1/runs/0/no-metrics/metrics");
    EXPECT_EQ(bare.status, 200);
    EXPECT_TRUE(bare.body["points"].empty());
    EXPECT_EQ(viewer.get("/v1/runs/0/no-metrics/logs").status, 404);

    // Confinement: a symlinked run is not a run; files symlinked out of a run are not read; names with
    // dot segments or of a root that does not exist are 404; nothing says what is outside.
    for (const char* bad :
         {"/v1/runs/0/linked", "/v1/runs/0/linked/metrics", "/v1/runs/0/..", "/v1/runs/0/%2e%2e/metrics",
          "/v1/runs/0/..%2Foutside", "/v1/runs/1/trained", "/v1/runs/x/trained", "/v1/runs/0/.hidden"}) {
        auto r = viewer.get(bad);
        EXPECT_TRUE(r.status == 404 || r.status == 400) << bad << ": " << r.status << " " << r.text;
        EXPECT_EQ(r.text.find("secret"), std::string::npos) << bad;
        EXPECT_EQ(r.text.find("123"), std::string::npos) << bad;
    }
    auto esc = viewer.get("/v1/runs/0/escaping/metrics");
    EXPECT_TRUE(esc.body["points"].empty()) << esc.text;
    EXPECT_EQ(viewer.get("/v1/runs/0/escaping/logs").status, 404);
    EXPECT_EQ(viewer.get("/v1/runs/0/escaping").body["ranks"], nlohmann::json::array());

    // Pages of one follow next_after to the end, each run once.
    std::vector<std::string> paged;
    std::string after;
    for (int i = 0; i < 10; ++i) {
        auto p = viewer.get("/v1/runs?limit=1" + (after.empty() ? "" : "&after=" + after));
        ASSERT_EQ(p.status, 200) << p.text;
        for (const auto& r : p.body["runs"]) paged.push_back(r["id"]);
        if (p.body["next_after"].is_null()) break;
        after = p.body["next_after"];
    }
    EXPECT_EQ(paged, ids);
    EXPECT_EQ(viewer.get("/v1/runs?limit=0").status, 400);
    EXPECT_EQ(viewer.get("/v1/runs?limit=201").status, 400);

    // A run started after the server is found by a later look (--runs-rescan-s 0.5).
    fs::create_directories(runs_ / "late");
    std::ofstream(runs_ / "late/meta.json") << "{\"run_id\": \"late\"}\n";
    EXPECT_TRUE(wait_for([&] { return viewer.get("/v1/runs/0/late").status == 200; }, 10));
    fs::remove_all(runs_ / "late");

    EXPECT_TRUE(listing() == before) << "the server changed a file under --runs-dir";
}

TEST_F(RunsDirTest, AMissingRunsDirIsAUsageError) {
    auto r = run_process({llmtrain_bin(), "serve", "--listen", "127.0.0.1:0", "--data-dir", (root_ / "srv2").string(),
                          "--runs-dir", (root_ / "absent").string()},
                         "", 60);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("--runs-dir"), std::string::npos) << r.err;
}

TEST_F(RunsDirTest, ChromiumListsTheTrainedRunAndDrawsItsLossCurves) {
    const fs::path web = fs::path(LLMT_SOURCE_DIR) / "web";
    ASSERT_TRUE(fs::exists("/usr/bin/chromium")) << "Debian's chromium is missing: run scripts/setup.sh";
    ASSERT_TRUE(fs::exists(web / "node_modules/playwright-core/package.json")) << "run scripts/setup.sh (50-web.sh)";
    const fs::path out = fs::path(LLMT_BINARY_DIR) / "tests/server/runs_dir";
    auto r = run_process({"node", (fs::path(LLMT_SOURCE_DIR) / "tests/server/runs_dir.mjs").string(),
                          "http://127.0.0.1:" + std::to_string(server_->port()), kViewerToken, "0/trained",
                          "0/trained-2", std::to_string(kSteps), out.string(), web.string()},
                         "", 300);
    ASSERT_FALSE(r.timed_out) << "runs_dir.mjs ran over 300 s\n" << r.err;
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    auto res = nlohmann::json::parse(r.out.substr(0, r.out.find('\n')), nullptr, false);
    ASSERT_TRUE(res.is_object()) << r.out;
    // Every train step and the evals at steps 4 and 8.
    EXPECT_EQ(res["counts"]["loss"][0], kSteps);
    EXPECT_EQ(res["counts"]["loss"][1], 2);
    EXPECT_EQ(res["compared"], 2);
}

}  // namespace
