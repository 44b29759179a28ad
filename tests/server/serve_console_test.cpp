// What `llmtrain serve` tells the person who started it: the dashboard link with the bound port on its
// own stderr (with a token only when serve generated the tokens file; never in a job's log), one line per job
// transition, how far each estimate was off (kept per job and used to correct the next estimate), no $0 cost without
// rates, a warmup longer than the run accepted with a warning, and a generated tokens file readable with cut.
#include <fmt/format.h>

#include <regex>

#include "server/auth.h"
#include "server_fixture.h"

namespace {

namespace fs = std::filesystem;
using namespace llmt::testing;

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

class ServeConsoleTest : public ::testing::Test {
protected:
    void SetUp() override {
        root_ = fs::temp_directory_path() / ("llmt_serve_console_" + std::to_string(::getpid()));
        shards_ = prepare_shards(root_);
    }
    void TearDown() override { fs::remove_all(root_); }
    fs::path root_, shards_;
};

TEST_F(ServeConsoleTest, LinkTransitionsAndEstimateRatios) {
    ServeProcess srv(root_ / "srv", {"--capacity", "cpus=2,gpus=0"});
    // The link: the bound port (--listen 127.0.0.1:0 picked it); with --tokens-file no token of the
    // operator's file is printed.
    const std::string link =
        fmt::format("open http://127.0.0.1:{}/ (sign in with a token of --tokens-file)", srv.port());
    ASSERT_TRUE(wait_for([&] { return has(srv.log(), link); }, 10)) << srv.log();
    for (const char* token : {kAdminToken, kSubmitterToken, kViewerToken})
        EXPECT_FALSE(has(srv.log(), token)) << srv.log();
    // Where the presets came from, on start-up.
    EXPECT_TRUE(has(srv.log(), fmt::format("presets from {}/configs/presets (--presets-dir)", LLMT_SOURCE_DIR)))
        << srv.log();

    Api api(srv.port(), kSubmitterToken);
    // run.threads 0 (all the CPUs this process may use): under serve a rank runs the one thread admission
    // counted for it, not every core of the host.
    std::string config = tiny_config(shards_, 4);
    config.replace(config.find("threads: 1"), 10, "threads: 0");
    auto r = api.post("/v1/jobs", nlohmann::json{{"name", "first"}, {"config", config}});
    ASSERT_EQ(r.status, 201) << r.text;
    // No rates file: the cost is unknown, not $0, and the estimate says why.
    EXPECT_TRUE(r.body["estimate"]["cost_usd"].is_null()) << r.body.dump(2);
    EXPECT_TRUE(has(r.body["estimate"]["cost_basis"].get<std::string>(), "no cpu_hour_usd rate"));
    EXPECT_TRUE(has(r.body["estimate"]["tokens_basis"].get<std::string>(), "trainer.max_steps 4 x global batch 64"))
        << r.body["estimate"].dump(2);
    EXPECT_EQ(r.body["estimate"]["correction"]["jobs"], 0);
    const int64_t id = r.body["id"];
    ASSERT_TRUE(wait_for(
        [&] { return api.get("/v1/jobs/" + std::to_string(id)).body.value("state", "") == "succeeded"; }, 300))
        << srv.log();
    const auto j = api.get("/v1/jobs/" + std::to_string(id)).body;
    ASSERT_TRUE(j["actual"]["estimate_ratio"].is_number()) << j.dump(2);
    EXPECT_TRUE(j["actual"]["cost_usd"].is_null());
    bool noted = false;
    for (const auto& e : j["history"]) noted |= has(e["detail"].get<std::string>(), "x its estimated duration");
    EXPECT_TRUE(noted) << j["history"].dump(2);

    ASSERT_TRUE(wait_for([&] { return has(srv.log(), "x its estimated duration"); }, 10)) << srv.log();
    const std::string log = srv.log();
    EXPECT_TRUE(has(log, fmt::format("job {} queued (first, by bob)", id))) << log;
    EXPECT_TRUE(has(log, fmt::format("job {} started (attempt 1)", id))) << log;
    EXPECT_TRUE(std::regex_search(log, std::regex(fmt::format("job {} succeeded: exit code 0 after [0-9]+s", id))))
        << log;

    // The job's own log never carries the link.
    auto jl = api.get("/v1/jobs/" + std::to_string(id) + "/logs?rank=0");
    ASSERT_EQ(jl.status, 200) << jl.text;
    EXPECT_TRUE(has(jl.text, "step")) << jl.text;
    EXPECT_TRUE(has(jl.text, "device: cpu, 1 threads")) << jl.text;
    EXPECT_FALSE(has(jl.text, "#token=")) << jl.text;

    // The next estimate on this device is corrected by the first job's ratio, with its range.
    const double ratio = j["actual"]["estimate_ratio"];
    auto e = api.post("/v1/estimate", nlohmann::json{{"name", "second"}, {"config", tiny_config(shards_, 4)}});
    ASSERT_EQ(e.status, 200) << e.text;
    const auto& est = e.body["estimate"];
    EXPECT_EQ(est["correction"]["jobs"], 1) << est.dump(2);
    EXPECT_NEAR(est["correction"]["factor"].get<double>(), ratio, 1e-9);
    EXPECT_NEAR(est["duration_s"].get<double>(), est["uncorrected_duration_s"].get<double>() * ratio, 1e-6);
}

// The form's path: a warmup longer than the run (the default preset's 20 with max_steps 12) is accepted,
// shortened, with the warning in the answer.
TEST_F(ServeConsoleTest, WarmupLongerThanTheRunIsAWarningNotA400) {
    ServeProcess srv(root_ / "srv2", {"--capacity", "cpus=0,gpus=0"});  // holds every job: it stays queued
    Api api(srv.port(), kSubmitterToken);
    auto r = api.post("/v1/jobs", nlohmann::json{{"name", "short"},
                                                 {"config", "gpt2_tiny_cpu"},
                                                 {"overrides", {{"trainer.max_steps", 12}}}});
    ASSERT_EQ(r.status, 201) << r.text;
    ASSERT_EQ(r.body["warnings"].size(), 1u) << r.body.dump(2);
    EXPECT_TRUE(has(r.body["warnings"][0].get<std::string>(), "shortened to 12")) << r.body.dump(2);
    // Cancelled before it ran: one line too.
    const int64_t id = r.body["id"];
    ASSERT_EQ(api.post("/v1/jobs/" + std::to_string(id) + "/cancel", "{}").status, 202);
    EXPECT_TRUE(wait_for(
        [&] { return has(srv.log(), fmt::format("job {} cancelled: cancelled by bob before it ran", id)); }, 10))
        << srv.log();
}

// A config asking for more threads per rank than admission counts (one CPU slot per rank) is refused.
TEST_F(ServeConsoleTest, MoreThanOneThreadPerRankIsRefused) {
    ServeProcess srv(root_ / "srv3", {"--capacity", "cpus=0,gpus=0"});
    Api api(srv.port(), kSubmitterToken);
    std::string config = tiny_config(shards_, 4);
    config.replace(config.find("threads: 1"), 10, "threads: 4");
    auto r = api.post("/v1/jobs", nlohmann::json{{"name", "wide"}, {"config", config}});
    EXPECT_EQ(r.status, 400) << r.text;
    EXPECT_TRUE(has(r.text, "run.threads")) << r.text;
    EXPECT_TRUE(has(r.text, "nproc_per_node")) << r.text;
}

// A generated tokens file: comment lines first, then one token per line, token first.
TEST(TokensFile, GeneratedFileIsReadableWithCut) {
    const fs::path dir = fs::temp_directory_path() / ("llmt_tokens_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    bool created = false;
    const auto table = llmt::server::TokenTable::load_or_create(dir / "tokens", &created);
    ASSERT_TRUE(created);
    auto r = run_process({"sh", "-c", "grep -v '^#' " + (dir / "tokens").string() + " | cut -d' ' -f1"});
    fs::remove_all(dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string token = r.out;
    while (!token.empty() && token.back() == '\n') token.pop_back();
    EXPECT_EQ(token, table.link_token());
    EXPECT_TRUE(table.authenticate("Bearer " + token).has_value());
}

}  // namespace
