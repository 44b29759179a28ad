// Hostile and invalid input against a real server whose queue admits nothing (cpus=0,gpus=0): every
// refusal is the right 4xx with {error: {code, message, field}} and leaves nothing behind (no job row,
// no job directory). Also: budgets refused with the figures, and the OpenAPI document matches the routes.
#include <netinet/in.h>
#include <sys/socket.h>

#include "server_fixture.h"

namespace {

namespace fs = std::filesystem;
using namespace llmt::testing;

class HostileTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        root_ = fs::temp_directory_path() / ("llmt_hostile_" + std::to_string(::getpid()));
        fs::create_directories(root_);
        std::ofstream(root_ / "rates.json") << R"({"cpu_hour_usd": 1.0})";
        std::ofstream(root_ / "quotas.json") << R"({"team=small": {"budget_usd": 0.5}})";
        server_ = new ServeProcess(root_ / "srv", {"--capacity", "cpus=0,gpus=0", "--rates-file",
                                                   (root_ / "rates.json").string(), "--quotas-file",
                                                   (root_ / "quotas.json").string()});
    }
    static void TearDownTestSuite() {
        delete server_;
        fs::remove_all(root_);
    }
    // A job body that passes validation (never runs: the queue admits nothing).
    static nlohmann::json ok_body(const std::string& name) {
        return {{"name", name}, {"config", "gpt2_tiny_cpu"}, {"overrides", {{"trainer.max_steps", 30}}}};
    }
    static int64_t job_count() {
        Api api(server_->port(), kAdminToken);
        auto r = api.get("/v1/jobs?limit=500");
        return static_cast<int64_t>(r.body["jobs"].size());
    }
    static int64_t job_dirs() {
        int64_t n = 0;
        std::error_code ec;
        for (auto it = fs::directory_iterator(root_ / "srv/data/jobs", ec); !ec && it != fs::directory_iterator();
             ++it)
            ++n;
        return n;
    }
    // Asserts status, error code and (when given) field, and that nothing was written.
    static void expect_refused(const Http& r, int status, const std::string& code, const std::string& field = "*") {
        EXPECT_EQ(r.status, status) << r.text;
        ASSERT_TRUE(r.body.is_object() && r.body.contains("error")) << r.text;
        EXPECT_EQ(r.body["error"]["code"], code) << r.text;
        EXPECT_FALSE(r.body["error"]["message"].get<std::string>().empty());
        if (field != "*") {
            EXPECT_EQ(r.body["error"]["field"], field) << r.text;
        }
    }
    static fs::path root_;
    static ServeProcess* server_;
};
fs::path HostileTest::root_;
ServeProcess* HostileTest::server_ = nullptr;

TEST_F(HostileTest, RefusalsAreFourHundredsAndWriteNothing) {
    const int64_t jobs_before = job_count(), dirs_before = job_dirs();
    Api api(server_->port(), kSubmitterToken);

    // A 20 MB body: refused by size before it is parsed.
    std::string big(20u << 20, 'x');
    expect_refused(api.post("/v1/jobs", big), 413, "payload_too_large");
    expect_refused(api.post("/v1/jobs", std::string("{\"name\": \"x\", ")), 400, "invalid_json");
    expect_refused(api.post("/v1/jobs", std::string("[1, 2]")), 400, "invalid_json");
    auto unknown = ok_body("unk");
    unknown["gpu_type"] = "h100";
    expect_refused(api.post("/v1/jobs", unknown), 400, "invalid_field", "gpu_type");
    // Bad config values come back with the key path, as from the CLI.
    auto bad_lr = ok_body("bad-lr");
    bad_lr["overrides"]["trainer.lr"] = "fast";
    auto r = api.post("/v1/jobs", bad_lr);
    expect_refused(r, 400, "invalid_config", "trainer.lr");
    EXPECT_NE(r.body["error"]["message"].get<std::string>().find("trainer.lr"), std::string::npos);
    r = api.post("/v1/jobs", nlohmann::json{{"name", "bad-yaml"}, {"config", "model: {n_layer: -3}\nbogus: 1\n"}});
    expect_refused(r, 400, "invalid_config");
    ASSERT_TRUE(r.body["error"].contains("details"));
    std::string keys;
    for (const auto& i : r.body["error"]["details"]["issues"]) keys += i["key"].get<std::string>() + " ";
    EXPECT_NE(keys.find("model.n_layer"), std::string::npos) << r.text;
    EXPECT_NE(keys.find("bogus"), std::string::npos) << r.text;
    auto bad_type = ok_body("bad-type");
    bad_type["nodes"] = "two";
    expect_refused(api.post("/v1/jobs", bad_type), 400, "invalid_field", "nodes");
    auto out_dir = ok_body("out-dir");
    out_dir["overrides"]["output.root_dir"] = "/etc";
    expect_refused(api.post("/v1/jobs", out_dir), 400, "invalid_field", "overrides.output.root_dir");
    // Names are DNS labels; path tricks never reach the file system.
    const std::string too_long(64, 'a');
    for (const std::string& name : {std::string("../etc"), std::string("a/b"), std::string("UPPER"),
                                    std::string("-lead"), std::string("x.y"), std::string(""), too_long})
        expect_refused(api.post("/v1/jobs", ok_body(name)), 400, "invalid_field", "name");
    // Bytes that are not UTF-8: refused, and the error document is still valid JSON.
    expect_refused(api.post("/v1/jobs", std::string("{\"name\": \"job\xa1\xff\", \"config\": \"x\"}")), 400,
                   "invalid_json");
    expect_refused(api.post("/v1/jobs", nlohmann::json{{"name", "p"}, {"config", "../../etc/passwd"}}), 400,
                   "invalid_config");
    expect_refused(api.post("/v1/jobs", nlohmann::json{{"name", "p"}, {"config", "no_such_preset"}}), 400,
                   "invalid_field", "config");
    // Auth: no token, a wrong token, a viewer submitting.
    Api anon(server_->port(), ""), wrong(server_->port(), "not-a-real-token-at-all"),
        viewer(server_->port(), kViewerToken);
    expect_refused(anon.post("/v1/jobs", ok_body("anon")), 401, "unauthorized");
    expect_refused(anon.get("/v1/jobs"), 401, "unauthorized");
    expect_refused(wrong.post("/v1/jobs", ok_body("wrong")), 401, "unauthorized");
    expect_refused(viewer.post("/v1/jobs", ok_body("viewer")), 403, "forbidden");
    // Unknown routes and ids.
    expect_refused(api.get("/v1/nope"), 404, "no_route");
    expect_refused(api.get("/v1/jobs/999999"), 404, "not_found", "id");
    expect_refused(api.get("/v1/jobs?limit=100000"), 400, "invalid_parameter", "limit");
    expect_refused(api.get("/v1/jobs?state=sleeping"), 400, "invalid_parameter", "state");

    EXPECT_EQ(job_count(), jobs_before);
    EXPECT_EQ(job_dirs(), dirs_before);
    // And the server still serves.
    EXPECT_EQ(api.post("/v1/jobs", ok_body("fine")).status, 201);
}

TEST_F(HostileTest, BudgetsRefusedWithFigures) {
    Api api(server_->port(), kSubmitterToken);
    // At 1 USD per CPU-hour the preset costs about 8 cents; a budget of 0.00001 USD is too small.
    auto b = ok_body("over");
    b["budget_usd"] = 0.00001;
    auto r = api.post("/v1/jobs", b);
    EXPECT_EQ(r.status, 422) << r.text;
    EXPECT_EQ(r.body["error"]["code"], "over_budget");
    EXPECT_EQ(r.body["error"]["field"], "budget_usd");
    EXPECT_GT(r.body["error"]["details"]["estimate"]["cost_usd"].get<double>(), 0.00001);
    EXPECT_NE(r.body["error"]["message"].get<std::string>().find("$"), std::string::npos);
    // The label's budget (0.5 USD) admits jobs until their summed estimates would pass it.
    auto est = api.post("/v1/estimate", ok_body("probe"));
    ASSERT_EQ(est.status, 200) << est.text;
    double each = est.body["estimate"]["cost_usd"];
    ASSERT_GT(each, 0.0);
    ASSERT_LT(each, 0.5);
    int accepted = 0, refused = 0;
    for (int i = 0; i < 200 && refused == 0; ++i) {
        auto j = ok_body("team-job-" + std::to_string(i));
        j["labels"] = {{"team", "small"}};
        auto x = api.post("/v1/jobs", j);
        if (x.status == 201) {
            ++accepted;
        } else {
            EXPECT_EQ(x.status, 422) << x.text;
            EXPECT_EQ(x.body["error"]["field"], "labels.team");
            EXPECT_NE(x.body["error"]["message"].get<std::string>().find("remaining budget"), std::string::npos);
            ++refused;
        }
    }
    EXPECT_EQ(refused, 1);
    EXPECT_EQ(accepted, static_cast<int>(0.5 / each)) << "each " << each;
}

TEST_F(HostileTest, OpenApiDocumentsExactlyTheServedRoutes) {
    Api api(server_->port(), kAdminToken);
    auto created = api.post("/v1/jobs", ok_body("doc-probe"));
    ASSERT_EQ(created.status, 201);
    std::string id = std::to_string(created.body["id"].get<int64_t>());
    auto doc = api.get("/v1/openapi.json");
    ASSERT_EQ(doc.status, 200);
    EXPECT_EQ(doc.body["openapi"].get<std::string>().substr(0, 2), "3.");
    // Every route the issue lists is documented...
    std::set<std::string> documented;
    for (const auto& [path, ops] : doc.body["paths"].items())
        for (const auto& [method, op] : ops.items()) documented.insert(method + " " + path);
    for (const char* want : {"post /v1/jobs", "get /v1/jobs", "get /v1/jobs/{id}", "post /v1/jobs/{id}/cancel",
                             "get /v1/jobs/{id}/logs", "get /v1/jobs/{id}/metrics", "get /v1/jobs/{id}/artifacts",
                             "get /v1/jobs/{id}/artifacts/{path}", "post /v1/estimate", "get /healthz", "get /metrics",
                             "get /v1/openapi.json"})
        EXPECT_TRUE(documented.count(want)) << want;
    // ...and every documented operation reaches a handler on the live server (no "no_route" answer).
    for (const auto& [path, ops] : doc.body["paths"].items()) {
        for (const auto& [method, op] : ops.items()) {
            std::string p = path;
            if (auto k = p.find("{id}"); k != std::string::npos) p.replace(k, 4, id);
            if (auto k = p.find("{path}"); k != std::string::npos) p.replace(k, 6, "summary.json");
            Http r = method == "get" ? api.get(p) : api.post(p, std::string("{}"));
            bool unrouted = r.status == 404 && r.body.is_object() && r.body["error"]["code"] == "no_route";
            EXPECT_FALSE(unrouted) << method << " " << p;
            EXPECT_NE(r.status, 405) << method << " " << p;
            // Documented security matches enforcement.
            if (!op["security"].empty()) {
                Api anon(server_->port(), "");
                Http u = method == "get" ? anon.get(p) : anon.post(p, std::string("{}"));
                EXPECT_EQ(u.status, 401) << method << " " << p;
            }
        }
    }
}

}  // namespace
