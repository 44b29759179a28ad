// POST /mcp against a real `llmtrain serve`: the MCP handshake, the tool list with input schemas, each
// tool through to a real job (submit_job -> job_status -> job_logs; estimate), the same bearer-token
// auth and roles as the REST routes, and protocol errors as JSON-RPC errors with codes and the field.
#include "server_fixture.h"

namespace {

namespace fs = std::filesystem;
using namespace llmt::testing;

class McpTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        root_ = fs::temp_directory_path() / ("llmt_mcp_" + std::to_string(::getpid()));
        shards_ = prepare_shards(root_);
        server_ = new ServeProcess(root_ / "srv", {"--capacity", "cpus=1,gpus=0"});
    }
    static void TearDownTestSuite() {
        if (!server_) return;  // SetUpTestSuite failed before the server started
        Api admin(server_->port(), kAdminToken);
        cancel_jobs(admin, {"running"});
        delete server_;
        fs::remove_all(root_);
    }
    // One JSON-RPC request; returns the HTTP answer (body parsed).
    static Http rpc(const char* token, const std::string& method, const nlohmann::json& params, int id = 7) {
        Api api(server_->port(), token);
        return api.post("/mcp",
                        nlohmann::json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}});
    }
    static Http call(const char* token, const std::string& tool, const nlohmann::json& args) {
        return rpc(token, "tools/call", {{"name", tool}, {"arguments", args}});
    }
    // Asserts a JSON-RPC error with `code` whose data names `field` (when given).
    static void expect_error(const Http& r, int code, const std::string& field = "") {
        ASSERT_TRUE(r.body.is_object()) << r.text;
        ASSERT_TRUE(r.body.contains("error")) << r.text;
        EXPECT_EQ(r.body["jsonrpc"], "2.0");
        EXPECT_EQ(r.body["error"]["code"], code) << r.text;
        EXPECT_FALSE(r.body["error"]["message"].get<std::string>().empty());
        if (!field.empty()) {
            EXPECT_EQ(r.body["error"]["data"]["field"], field) << r.text;
        }
    }
    static fs::path root_, shards_;
    static ServeProcess* server_;
};
fs::path McpTest::root_, McpTest::shards_;
ServeProcess* McpTest::server_ = nullptr;

TEST_F(McpTest, HandshakeAndToolList) {
    auto init = rpc(kViewerToken, "initialize",
                    {{"protocolVersion", "2025-06-18"}, {"capabilities", nlohmann::json::object()},
                     {"clientInfo", {{"name", "test"}, {"version", "1"}}}},
                    1);
    ASSERT_EQ(init.status, 200) << init.text;
    EXPECT_EQ(init.body["id"], 1);
    EXPECT_EQ(init.body["result"]["protocolVersion"], "2025-06-18");
    EXPECT_TRUE(init.body["result"]["capabilities"].contains("tools"));
    EXPECT_EQ(init.body["result"]["serverInfo"]["name"], "llmtrain");
    // A notification is accepted with no answer.
    Api viewer(server_->port(), kViewerToken);
    auto note = viewer.post("/mcp", nlohmann::json{{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
    EXPECT_EQ(note.status, 202);
    EXPECT_TRUE(note.text.empty()) << note.text;
    EXPECT_EQ(rpc(kViewerToken, "ping", nlohmann::json::object()).body["result"], nlohmann::json::object());

    auto list = rpc(kViewerToken, "tools/list", nlohmann::json::object());
    ASSERT_EQ(list.status, 200) << list.text;
    std::map<std::string, nlohmann::json> tools;
    for (const auto& t : list.body["result"]["tools"]) tools[t["name"]] = t;
    for (const char* name : {"submit_job", "job_status", "job_logs", "estimate"}) {
        ASSERT_TRUE(tools.count(name)) << name << " missing: " << list.text;
        EXPECT_EQ(tools[name]["inputSchema"]["type"], "object") << name;
        EXPECT_FALSE(tools[name]["description"].get<std::string>().empty()) << name;
    }
    // submit_job takes POST /v1/jobs' body schema.
    auto req = tools["submit_job"]["inputSchema"]["required"];
    EXPECT_NE(std::find(req.begin(), req.end(), "name"), req.end());
    // ... and one of config (a training job) or command (a command job, server/jobs/command_job.h).
    EXPECT_EQ(tools["submit_job"]["inputSchema"]["oneOf"],
              (nlohmann::json::array({{{"required", {"config"}}}, {{"required", {"command"}}}})));
    EXPECT_TRUE(tools["submit_job"]["inputSchema"]["properties"].contains("command"));
    EXPECT_TRUE(tools["submit_job"]["inputSchema"]["properties"].contains("overrides"));
    EXPECT_EQ(tools["job_status"]["inputSchema"]["required"], nlohmann::json::array({"id"}));

    // /mcp is in the OpenAPI document.
    auto doc = viewer.get("/v1/openapi.json");
    EXPECT_TRUE(doc.body["paths"].contains("/mcp")) << doc.text.substr(0, 200);
}

TEST_F(McpTest, ToolsRunTheRestOperations) {
    auto sub = call(kSubmitterToken, "submit_job", {{"name", "mcp-tiny"}, {"config", tiny_config(shards_, 3)}});
    ASSERT_EQ(sub.status, 200) << sub.text;
    ASSERT_TRUE(sub.body.contains("result")) << sub.text;
    const auto& res = sub.body["result"];
    EXPECT_EQ(res["isError"], false);
    EXPECT_EQ(res["content"][0]["type"], "text");
    EXPECT_EQ(res["structuredContent"]["state"], "queued");
    int64_t id = res["structuredContent"]["id"];
    // The content text is the same JSON as structuredContent.
    EXPECT_EQ(nlohmann::json::parse(res["content"][0]["text"].get<std::string>()), res["structuredContent"]);

    ASSERT_TRUE(wait_for(
        [&] {
            return call(kViewerToken, "job_status", {{"id", id}}).body["result"]["structuredContent"]["state"] ==
                   "succeeded";
        },
        300))
        << call(kViewerToken, "job_status", {{"id", id}}).text << server_->log();
    auto st = call(kViewerToken, "job_status", {{"id", id}}).body["result"]["structuredContent"];
    Api rest(server_->port(), kViewerToken);
    auto same = rest.get("/v1/jobs/" + std::to_string(id)).body;
    EXPECT_EQ(st["name"], "mcp-tiny");
    EXPECT_EQ(st["submitted_by"], "bob");
    EXPECT_EQ(st["history"], same["history"]);
    EXPECT_EQ(st["progress"], same["progress"]);

    auto logs = call(kViewerToken, "job_logs", {{"id", id}, {"tail", 50}});
    ASSERT_TRUE(logs.body.contains("result")) << logs.text;
    std::string text = logs.body["result"]["content"][0]["text"];
    EXPECT_NE(text.find("=== llmtrain serve: job " + std::to_string(id) + " attempt 1"), std::string::npos) << text;
    auto one = call(kViewerToken, "job_logs", {{"id", id}, {"tail", 1}});
    std::string last = one.body["result"]["content"][0]["text"];
    EXPECT_LE(std::count(last.begin(), last.end(), '\n'), 1) << last;

    auto est = call(kViewerToken, "estimate", {{"config", tiny_config(shards_, 3)}});
    ASSERT_TRUE(est.body.contains("result")) << est.text;
    EXPECT_TRUE(est.body["result"]["structuredContent"].contains("estimate")) << est.text;
    EXPECT_EQ(est.body["result"]["structuredContent"]["config_valid"], true);
}

TEST_F(McpTest, SameAuthAndRolesAsTheRestRoutes) {
    Api anon(server_->port(), "");
    EXPECT_EQ(anon.post("/mcp", nlohmann::json{{"jsonrpc", "2.0"}, {"id", 1}, {"method", "tools/list"}}).status, 401);
    Api wrong(server_->port(), "wrong-token-0123456789abcdef");
    EXPECT_EQ(wrong.post("/mcp", nlohmann::json{{"jsonrpc", "2.0"}, {"id", 1}, {"method", "tools/list"}}).status, 401);

    Api admin(server_->port(), kAdminToken);
    size_t before = admin.get("/v1/jobs?limit=500").body["jobs"].size();
    auto r = call(kViewerToken, "submit_job", {{"name", "viewer-try"}, {"config", tiny_config(shards_, 3)}});
    expect_error(r, -32003);
    EXPECT_NE(r.body["error"]["message"].get<std::string>().find("submitter"), std::string::npos) << r.text;
    EXPECT_EQ(r.body["error"]["data"]["http_status"], 403);
    EXPECT_EQ(admin.get("/v1/jobs?limit=500").body["jobs"].size(), before) << "a viewer's submit_job created a job";
}

TEST_F(McpTest, ErrorsAreJsonRpcErrorsNamingTheField) {
    Api api(server_->port(), kSubmitterToken);
    auto parse = api.post("/mcp", std::string("{not json"));
    EXPECT_EQ(parse.status, 400);
    expect_error(parse, -32700);
    EXPECT_TRUE(parse.body["id"].is_null());
    expect_error(api.post("/mcp", std::string("[]")), -32600);
    expect_error(api.post("/mcp", nlohmann::json{{"id", 1}, {"method", "ping"}}), -32600, "jsonrpc");
    expect_error(api.post("/mcp", nlohmann::json{{"jsonrpc", "2.0"}, {"id", 1}}), -32600, "method");
    // Members of the wrong type are invalid requests (HTTP 400), never a 500 with the JSON library's text.
    for (const auto& bad : {nlohmann::json{{"jsonrpc", 5}, {"id", 1}, {"method", "ping"}},
                            nlohmann::json{{"jsonrpc", nullptr}, {"id", 1}, {"method", "ping"}},
                            nlohmann::json{{"jsonrpc", {1, 2}}, {"method", "ping"}}}) {
        auto r = api.post("/mcp", bad);
        EXPECT_EQ(r.status, 400) << bad.dump() << " " << r.text;
        expect_error(r, -32600, "jsonrpc");
        EXPECT_EQ(r.text.find("type_error"), std::string::npos) << r.text;
    }
    for (const auto& bad_id :
         {nlohmann::json(1.5), nlohmann::json::object(), nlohmann::json::array(), nlohmann::json(true)}) {
        auto r = api.post("/mcp", nlohmann::json{{"jsonrpc", "2.0"}, {"id", bad_id}, {"method", "ping"}});
        EXPECT_EQ(r.status, 400) << r.text;
        expect_error(r, -32600, "id");
    }
    for (const auto& bad_params : {nlohmann::json(5), nlohmann::json("x"), nlohmann::json::array({1})}) {
        auto r = api.post("/mcp",
                          nlohmann::json{{"jsonrpc", "2.0"}, {"id", 1}, {"method", "ping"}, {"params", bad_params}});
        EXPECT_EQ(r.status, 400) << r.text;
        expect_error(r, -32600, "params");
    }
    auto init = rpc(kSubmitterToken, "initialize", {{"protocolVersion", 7}});
    EXPECT_EQ(init.status, 200) << init.text;
    EXPECT_TRUE(init.body.contains("result")) << init.text;

    auto unknown = rpc(kSubmitterToken, "tools/destroy", nlohmann::json::object(), 42);
    expect_error(unknown, -32601, "method");
    EXPECT_EQ(unknown.body["id"], 42);
    expect_error(rpc(kSubmitterToken, "tools/call", {{"arguments", nlohmann::json::object()}}), -32602, "name");
    expect_error(call(kSubmitterToken, "rm_rf", nlohmann::json::object()), -32602, "name");
    expect_error(rpc(kSubmitterToken, "tools/call", {{"name", "job_status"}, {"arguments", 5}}), -32602, "arguments");
    expect_error(call(kSubmitterToken, "job_status", nlohmann::json::object()), -32602, "id");
    expect_error(call(kSubmitterToken, "job_status", {{"id", "x"}}), -32602, "id");
    expect_error(call(kSubmitterToken, "job_status", {{"id", 1}, {"verbose", true}}), -32602, "verbose");
    expect_error(call(kSubmitterToken, "job_logs", {{"id", 1}, {"tail", -1}}), -32602, "tail");
    expect_error(call(kSubmitterToken, "job_status", {{"id", 999999}}), -32004, "id");
    // The REST validation, field for field: a bad name, an unknown field, a bad config value.
    expect_error(call(kSubmitterToken, "submit_job", {{"name", "../etc"}, {"config", tiny_config(shards_, 3)}}),
                 -32602, "name");
    expect_error(
        call(kSubmitterToken, "submit_job", {{"name", "ok"}, {"config", tiny_config(shards_, 3)}, {"bogus", 1}}),
        -32602, "bogus");
    auto cfg = call(kSubmitterToken, "submit_job",
                    {{"name", "ok"}, {"config", tiny_config(shards_, 3)}, {"overrides", {{"trainer.lr", -1}}}});
    expect_error(cfg, -32602, "trainer.lr");
    EXPECT_EQ(cfg.body["error"]["data"]["error"], "invalid_config");
}

}  // namespace
