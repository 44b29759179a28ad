// The dashboard end to end: a real `llmtrain serve` serving web/dist at /, finished jobs of the tiny
// preset on the local executor, and tests/server/dashboard.mjs driving Debian's Chromium through
// playwright-core (job list with results, job page with loss curves and legends, the confusion-matrix
// heat map, run comparison, cancel with its confirmation, resubmit, clone, resume, the submit form).
// When Chromium or the npm modules are missing the test fails and says so (scripts/setup.sh installs
// both); it never skips.
#include <regex>

#include "server_fixture.h"

namespace {

namespace fs = std::filesystem;
using namespace llmt::testing;

constexpr int kSteps = 12;

class DashboardTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        root_ = fs::temp_directory_path() / ("llmt_dash_" + std::to_string(::getpid()));
        shards_ = prepare_shards(root_);
        server_ = new ServeProcess(root_ / "srv", {"--capacity", "cpus=1,gpus=0"});
    }
    static void TearDownTestSuite() {
        if (!server_) return;  // SetUpTestSuite failed before the server started
        // Jobs outlive the server (their own process groups): stop any a failed test left running.
        Api admin(server_->port(), kAdminToken);
        cancel_jobs(admin, {"running", "queued", "retrying"});
        delete server_;
        fs::remove_all(root_);
    }
    // The tiny preset shrunk to a few seconds of training on the fixture's shards, every step logged
    // and an eval every 4 steps (so the val-loss curve has 3 points).
    static nlohmann::json overrides() {
        return {{"data.train_shards", (shards_ / "train_*.bin").string()},
                {"data.val_shards", (shards_ / "val_*.bin").string()},
                {"model.n_layer", 1}, {"model.n_head", 2}, {"model.d_model", 32}, {"model.block_size", 32},
                {"trainer.max_steps", kSteps}, {"trainer.micro_batch_size", 2}, {"trainer.warmup_steps", 2},
                {"trainer.log_every_steps", 1}, {"trainer.eval_every_steps", 4}, {"trainer.eval_steps", 2},
                {"trainer.save_every_steps", 0}, {"run.threads", 1}};
    }
    static std::string state_of(Api& api, int64_t id) {
        return api.get("/v1/jobs/" + std::to_string(id)).body.value("state", "");
    }
    static int64_t submit(Api& api, const std::string& name, const nlohmann::json& overrides) {
        auto sub = api.post("/v1/jobs",
                            nlohmann::json{{"name", name}, {"config", "gpt2_tiny_cpu"}, {"overrides", overrides}});
        EXPECT_EQ(sub.status, 201) << sub.text;
        return sub.body.value("id", int64_t{-1});
    }
    static fs::path run_dir(int64_t id) {
        return root_ / "srv/data/jobs" / std::to_string(id) / "runs" / ("job-" + std::to_string(id));
    }
    static fs::path root_, shards_;
    static ServeProcess* server_;
};
fs::path DashboardTest::root_, DashboardTest::shards_;
ServeProcess* DashboardTest::server_ = nullptr;

TEST_F(DashboardTest, AssetsNeedNoTokenCarryCspAndDoNotShadowTheApi) {
    httplib::Client cli("127.0.0.1", server_->port());
    auto index = cli.Get("/");
    ASSERT_TRUE(index);
    ASSERT_EQ(index->status, 200) << "is web/dist built? (scripts/setup.sh)\n" << index->body << server_->log();
    EXPECT_EQ(index->get_header_value("Content-Type"), "text/html; charset=utf-8");
    std::string csp = index->get_header_value("Content-Security-Policy");
    EXPECT_NE(csp.find("script-src 'self'"), std::string::npos) << csp;
    EXPECT_EQ(csp.find("unsafe-inline"), std::string::npos) << csp;
    EXPECT_EQ(index->get_header_value("X-Content-Type-Options"), "nosniff");
    // Every <script> has a src: nothing inline for the policy to block.
    std::regex script("<script\\b[^>]*>");
    for (auto it = std::sregex_iterator(index->body.begin(), index->body.end(), script); it != std::sregex_iterator();
         ++it)
        EXPECT_NE(it->str().find(" src="), std::string::npos) << it->str();
    EXPECT_NE(index->body.find("src=\"/app.js\""), std::string::npos);

    for (const char* asset : {"/app.js", "/vendor/uPlot.esm.js", "/style.css"}) {
        auto r = cli.Get(asset);
        ASSERT_TRUE(r) << asset;
        EXPECT_EQ(r->status, 200) << asset;
        EXPECT_FALSE(r->get_header_value("Content-Security-Policy").empty()) << asset;
    }
    EXPECT_EQ(cli.Get("/app.js")->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
    // Unknown files, dot segments and files outside the folder answer the API's 404.
    for (const char* bad : {"/missing.js", "/../CMakeLists.txt", "/%2e%2e/%2e%2e/etc/passwd.txt", "/.hidden.js",
                            "/vendor/../../package.json"}) {
        auto r = cli.Get(bad);
        ASSERT_TRUE(r) << bad;
        EXPECT_EQ(r->status, 404) << bad << ": " << r->body;
    }
    auto nf = nlohmann::json::parse(cli.Get("/missing.js")->body, nullptr, false);
    EXPECT_EQ(nf["error"]["code"], "no_route");
    // The API keeps its auth: the page's data needs the token.
    Api anon(server_->port(), "");
    EXPECT_EQ(anon.get("/v1/jobs").status, 401);
    EXPECT_EQ(anon.get("/v1/presets").status, 401);
    Api viewer(server_->port(), kViewerToken);
    auto presets = viewer.get("/v1/presets");
    ASSERT_EQ(presets.status, 200) << presets.text;
    bool tiny = false;
    for (const auto& p : presets.body["presets"])
        if (p["name"] == "gpt2_tiny_cpu") tiny = !p["description"].get<std::string>().empty();
    EXPECT_TRUE(tiny) << presets.text;
}

TEST_F(DashboardTest, ChromiumShowsTheJobDrawsLossCurvesAndSubmitsFromTheForm) {
    const fs::path chromium = "/usr/bin/chromium";
    const fs::path web = fs::path(LLMT_SOURCE_DIR) / "web";
    ASSERT_TRUE(fs::exists(chromium)) << "Debian's chromium is not installed at " << chromium
                                      << ": run scripts/setup.sh (its PACKAGES list has chromium)";
    ASSERT_TRUE(fs::exists(web / "node_modules/playwright-core/package.json"))
        << "playwright-core is not installed in " << web / "node_modules" << ": run scripts/setup.sh (50-web.sh)";
    ASSERT_EQ(run_process({"node", "--version"}, "", 30).exit_code, 0) << "node is not on PATH";

    Api api(server_->port(), kSubmitterToken);
    // Two finished runs to compare (the second also shows the heat map) and one that runs until the
    // page cancels it (capacity 1: it starts after the two).
    const int64_t id = submit(api, "tiny-dash", overrides());
    auto other = overrides();
    other["trainer.lr"] = 3e-3;  // another curve than the first run's (its lr peaks at 1e-3)
    const int64_t heat = submit(api, "tiny-heat", other);
    // A run that fails at once (exit 2, not retried): its page must lead with the error.
    auto missing = overrides();
    missing["data.train_shards"] = (shards_ / "missing_*.bin").string();
    const int64_t failed = submit(api, "tiny-fails", missing);
    auto forever = overrides();
    forever["trainer.max_steps"] = 1000000;
    forever["trainer.save_every_steps"] = 0;
    forever["trainer.eval_every_steps"] = 0;
    const int64_t longer = submit(api, "tiny-long", forever);
    for (int64_t j : {id, heat})
        ASSERT_TRUE(wait_for([&] { return state_of(api, j) == "succeeded"; }, 300))
            << api.get("/v1/jobs/" + std::to_string(j)).text << server_->log();
    ASSERT_TRUE(wait_for([&] { return state_of(api, failed) == "failed"; }, 300))
        << api.get("/v1/jobs/" + std::to_string(failed)).text << server_->log();
    // A classifier's results without training one here: this run's summary.json is replaced by one of the
    // shape `train` writes for a classifier (test_accuracy, per-class accuracy, confusion matrix).
    llmt::write_file_atomic(run_dir(heat) / "summary.json", R"({
      "run_id": "job-heat", "final_train_loss": 0.4, "final_val_loss": 0.45, "best_val_loss": 0.44, "steps": 12,
      "test_accuracy": 0.8, "test_loss": 0.55, "per_class_accuracy": [0.9, 0.7, 0.8],
      "confusion_matrix": [[9, 1, 0], [2, 7, 1], [1, 1, 8]], "class_names": ["T-shirt/top", "Trouser", "Pullover"]})");
    const nlohmann::json extra = {{"heat", heat}, {"long", longer}, {"compare", {id, heat}}, {"failed", failed}};

    const fs::path out = fs::path(LLMT_BINARY_DIR) / "tests/server/dashboard";
    auto r = run_process({"node", (fs::path(LLMT_SOURCE_DIR) / "tests/server/dashboard.mjs").string(),
                          "http://127.0.0.1:" + std::to_string(server_->port()), kSubmitterToken, std::to_string(id),
                          std::to_string(kSteps), out.string(), web.string(), overrides().dump(), extra.dump()},
                         "", 300);
    ASSERT_FALSE(r.timed_out) << "dashboard.mjs ran over 300 s\n" << r.err;
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    auto line = r.out.substr(0, r.out.find('\n'));
    auto res = nlohmann::json::parse(line, nullptr, false);
    ASSERT_TRUE(res.is_object()) << r.out;
    std::cout << "dashboard screenshot: " << res["screenshot"].get<std::string>() << "\n";
    EXPECT_TRUE(fs::exists(res["screenshot"].get<std::string>()));
    // The chart's data: every train step and the 3 evals (steps 4, 8, 12).
    EXPECT_EQ(res["counts"]["loss"][0], kSteps);
    EXPECT_EQ(res["counts"]["loss"][1], 3);

    // The result columns came from the API's compact result; the full one has the classifier's fields.
    auto h = api.get("/v1/jobs/" + std::to_string(heat));
    EXPECT_EQ(h.body["result"]["confusion_matrix"][2][2], 8) << h.text;
    auto listed = api.get("/v1/jobs?limit=500");
    bool compact = false;
    for (const auto& j : listed.body["jobs"])
        if (j["id"] == heat) compact = j["result"] == nlohmann::json::parse(
            R"({"final_train_loss":0.4,"final_val_loss":0.45,"best_val_loss":0.44,"test_accuracy":0.8})");
    EXPECT_TRUE(compact) << listed.text;

    // Cancel: dismissed once (still running then), accepted once (cancelled).
    EXPECT_EQ(res["dismissed_state"], "running") << r.out;
    EXPECT_EQ(state_of(api, longer), "cancelled");
    // Resubmit: a new job with the first job's spec and config.
    const int64_t again = res["resubmitted"];
    EXPECT_NE(again, id);
    auto a = api.get("/v1/jobs/" + std::to_string(id));
    auto b = api.get("/v1/jobs/" + std::to_string(again));
    EXPECT_EQ(b.body["spec"], a.body["spec"]) << b.text;
    EXPECT_EQ(b.body["config_yaml"], a.body["config_yaml"]);
    EXPECT_EQ(b.body["submitted_by"], "bob");
    // Resume: a new job continuing the cancelled one (resume_from); seen starting past step 0, then stopped.
    const int64_t resumed = res["resumed"];
    auto rj = api.get("/v1/jobs/" + std::to_string(resumed));
    EXPECT_EQ(rj.body["spec"]["resume_from"], longer) << rj.text;
    EXPECT_EQ(rj.body["spec"]["overrides"], api.get("/v1/jobs/" + std::to_string(longer)).body["spec"]["overrides"]);
    Api admin(server_->port(), kAdminToken);
    for (int64_t j : {again, resumed}) admin.post("/v1/jobs/" + std::to_string(j) + "/cancel", "");

    // The form's job exists in the API as submitted, and runs to success.
    int64_t created = res["created"];
    auto j = api.get("/v1/jobs/" + std::to_string(created));
    ASSERT_EQ(j.status, 200) << j.text;
    EXPECT_EQ(j.body["name"], "from-form");
    EXPECT_EQ(j.body["submitted_by"], "bob");
    EXPECT_EQ(j.body["labels"]["source"], "dashboard-test");
    EXPECT_EQ(j.body["spec"]["overrides"]["trainer.max_steps"], std::to_string(kSteps)) << j.body["spec"].dump();
    EXPECT_TRUE(wait_for([&] { return state_of(api, created) == "succeeded"; }, 300))
        << api.get("/v1/jobs/" + std::to_string(created)).text;
}

}  // namespace
