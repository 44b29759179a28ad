// Findings 2, 5 and 7 of docs/security.md's Tests list (parsing): hostile JSON and YAML replayed against a
// real `llmtrain serve` on loopback and the real CLI. Every probe is bounded by a timeout; after each the
// server must still answer /healthz. Nothing here needs a job to run: the server's queue admits nothing.
#include <chrono>
#include <future>

#include "server/server_fixture.h"
#include "support/hostile_input.h"

namespace {

namespace fs = std::filesystem;
using namespace llmt::testing;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// One request with a 15 s bound on connect, read and write: a hang fails the probe instead of the suite.
Http bounded_post(int port, const std::string& token, const std::string& path, const std::string& body) {
    return Api(port, token, 15).post(path, body);
}

int healthz(int port) { return Api(port, "", 5).get("/healthz").status; }

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

class ParseSecurityTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        root_ = fs::temp_directory_path() / ("llmt_sec_parse_" + std::to_string(::getpid()));
        fs::create_directories(root_);
        server_ = new ServeProcess(root_ / "srv", {"--capacity", "cpus=0,gpus=0"});
    }
    static void TearDownTestSuite() {
        delete server_;
        fs::remove_all(root_);
    }
    static int port() { return server_->port(); }
    static int64_t job_count() {
        Api api(port(), kAdminToken);
        return static_cast<int64_t>(api.get("/v1/jobs?limit=500").body["jobs"].size());
    }
    static void expect_error(const Http& r, int status, const std::string& field, const std::string& part) {
        EXPECT_EQ(r.status, status) << r.text;
        ASSERT_TRUE(r.body.is_object() && r.body.contains("error")) << r.text;
        if (!field.empty()) {
            EXPECT_EQ(r.body["error"]["field"], field) << r.text;
        }
        EXPECT_TRUE(contains(r.body["error"]["message"].get<std::string>(), part)) << r.text;
    }
    static fs::path root_;
    static ServeProcess* server_;
};
fs::path ParseSecurityTest::root_;
ServeProcess* ParseSecurityTest::server_ = nullptr;

TEST_F(ParseSecurityTest, HundredThousandNestedBracketsAreFourHundreds) {
    const std::string deep(100000, '[');
    const std::string deep_in_field = "{\"name\": \"x\", \"nodes\": " + deep;
    struct Probe {
        const char* token;
        const char* path;
        std::string body;
    };
    const std::vector<Probe> probes = {
        {kViewerToken, "/v1/jobs", deep},          // refused by role before the body is read
        {kSubmitterToken, "/v1/jobs", deep},
        {kSubmitterToken, "/v1/jobs", deep_in_field},
        {kViewerToken, "/v1/estimate", deep_in_field},
        {kViewerToken, "/mcp", deep},
        {kViewerToken, "/mcp", "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"tools/call\", \"params\": " + deep},
    };
    for (const auto& p : probes) {
        SCOPED_TRACE(std::string(p.path) + " " + p.body.substr(0, 40));
        const Http r = bounded_post(port(), p.token, p.path, p.body);
        EXPECT_GE(r.status, 400) << r.text;
        EXPECT_LT(r.status, 500) << r.text;
        EXPECT_LT(r.text.size(), 2000u) << "the error must not echo the body";
        ASSERT_EQ(healthz(port()), 200) << "server died: " << server_->log();
    }
    const Http r = bounded_post(port(), kSubmitterToken, "/v1/jobs", deep_in_field);
    expect_error(r, 400, "", "nested deeper than 64 levels");
    EXPECT_EQ(r.body["error"]["field"].get<std::string>().rfind("nodes[0][0]", 0), 0u) << r.text;
}

TEST_F(ParseSecurityTest, DeepValueInAnMcpToolArgumentIsAnRpcError) {
    // Within the depth limit but deep enough that an error message serialising it recursively would
    // have been large: the tool's error describes the value instead.
    const std::string v = std::string(60, '[') + std::string(60, ']');
    const Http r = bounded_post(port(), kViewerToken, "/mcp",
                                "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"tools/call\", \"params\": {\"name\": "
                                "\"job_status\", \"arguments\": {\"id\": " + v + "}}}");
    EXPECT_GE(r.status, 200) << r.text;
    EXPECT_LT(r.status, 500) << r.text;
    EXPECT_TRUE(contains(r.text, "an array of 1 element")) << r.text;
    EXPECT_EQ(healthz(port()), 200);
}

TEST_F(ParseSecurityTest, NumberOverflowIsFourHundredNamingTheKey) {
    expect_error(bounded_post(port(), kSubmitterToken, "/v1/jobs",
                              R"({"name": "x", "config": "gpt2_tiny_cpu", "budget_usd": 1e400})"),
                 400, "budget_usd", "does not fit");
    expect_error(bounded_post(port(), kSubmitterToken, "/v1/jobs",
                              R"({"name": "x", "config": {"trainer": {"lr": 1e400}}})"),
                 400, "config.trainer.lr", "does not fit");
    expect_error(bounded_post(port(), kSubmitterToken, "/v1/jobs",
                              R"({"name": "x", "config": "gpt2_tiny_cpu", "nodes": 123456789012345678901234567890})"),
                 400, "nodes", "integer does not fit 64 bits");
    // As a YAML string, through the config loader.
    const Http y = bounded_post(port(), kSubmitterToken, "/v1/jobs",
                                R"({"name": "x", "config": "trainer: {lr: 1e400}\n"})");
    EXPECT_EQ(y.status, 400) << y.text;
    EXPECT_TRUE(contains(y.text, "trainer.lr")) << y.text;
    EXPECT_EQ(job_count(), 0);
}

TEST_F(ParseSecurityTest, DuplicateKeysAreFourHundredNamingTheKey) {
    expect_error(bounded_post(port(), kSubmitterToken, "/v1/jobs",
                              R"({"name": "a", "config": "gpt2_tiny_cpu", "name": "b"})"),
                 400, "name", "duplicate key");
    expect_error(
        bounded_post(port(), kSubmitterToken, "/v1/jobs",
                     R"({"name": "a", "config": "gpt2_tiny_cpu", "overrides": {"trainer.lr": 1, "trainer.lr": 2}})"),
        400, "overrides.trainer.lr", "duplicate key");
    EXPECT_EQ(job_count(), 0);
}

TEST_F(ParseSecurityTest, AliasBombSubmitIsRefusedQuicklyWhileHealthzAnswers) {
    const nlohmann::json body = {{"name", "bomb"}, {"config", yaml_alias_bomb()}};
    const auto t0 = std::chrono::steady_clock::now();
    auto submit = std::async(std::launch::async,
                             [&] { return bounded_post(port(), kSubmitterToken, "/v1/jobs", body.dump()); });
    int answered = 0;
    while (submit.wait_for(std::chrono::milliseconds(20)) != std::future_status::ready) {
        ASSERT_EQ(healthz(port()), 200);
        ++answered;
        ASSERT_LT(seconds_since(t0), 20.0);
    }
    const Http r = submit.get();
    EXPECT_LT(seconds_since(t0), 5.0);
    EXPECT_EQ(r.status, 400) << r.text;
    EXPECT_TRUE(contains(r.text, "expands to more than 100000 nodes")) << r.text;
    EXPECT_EQ(healthz(port()), 200);
    // The same bomb in an override value.
    const std::string value = yaml_alias_bomb_flow();
    const nlohmann::json over = {
        {"name", "bomb2"}, {"config", "gpt2_tiny_cpu"}, {"overrides", {{"data.paths", value}}}};
    const auto t1 = std::chrono::steady_clock::now();
    const Http o = bounded_post(port(), kSubmitterToken, "/v1/jobs", over.dump());
    EXPECT_LT(seconds_since(t1), 5.0);
    EXPECT_EQ(o.status, 400) << o.text;
    EXPECT_TRUE(contains(o.text, "data.paths")) << o.text;
    EXPECT_EQ(job_count(), 0);
}

TEST_F(ParseSecurityTest, SecondYamlDocumentInASubmitIsRefused) {
    const nlohmann::json body = {{"name", "two"}, {"config", "run: {name: a}\n---\nrun: {name: b}\n"}};
    const Http r = bounded_post(port(), kSubmitterToken, "/v1/jobs", body.dump());
    EXPECT_EQ(r.status, 400) << r.text;
    EXPECT_TRUE(contains(r.text, "a second YAML document")) << r.text;
    EXPECT_TRUE(contains(r.text, "request config:2:1")) << r.text;  // the '---' line
    EXPECT_EQ(job_count(), 0);
}

// ---- the CLI ----

class ParseCliTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("llmt_sec_parse_cli_" + std::to_string(::getpid()));
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }
    fs::path write(const std::string& name, const std::string& text) {
        std::ofstream(dir_ / name) << text;
        return dir_ / name;
    }
    fs::path dir_;
};

TEST_F(ParseCliTest, DetokenizeOfADeepArrayIsExitTwo) {
    const auto r = run_process({llmtrain_bin(), "detokenize"}, std::string(100000, '['), 30);
    ASSERT_FALSE(r.timed_out);
    EXPECT_FALSE(r.signaled) << "signal " << r.signal;
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(contains(r.err, "nested deeper than 1 level")) << r.err;
}

TEST_F(ParseCliTest, ValidateOfTheAliasBombIsExitTwoWithinSeconds) {
    const fs::path f = write("bomb.yaml", yaml_alias_bomb());
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = run_process({llmtrain_bin(), "validate", "--config", f.string()}, "", 30);
    ASSERT_FALSE(r.timed_out);
    EXPECT_LT(seconds_since(t0), 5.0);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(contains(r.out + r.err, "expands to more than 100000 nodes")) << r.out << r.err;
}

TEST_F(ParseCliTest, ValidateOfASecondDocumentNamesItsLine) {
    const fs::path f = write("two.yaml", "run: {name: a}\n---\nrun: {name: b}\n");
    const auto r = run_process({llmtrain_bin(), "validate", "--config", f.string()}, "", 30);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(contains(r.out + r.err, "two.yaml:2:1")) << r.out << r.err;
    EXPECT_TRUE(contains(r.out + r.err, "a second YAML document")) << r.out << r.err;
}

TEST_F(ParseCliTest, ValidateOfAnOverflowingNumberNamesTheKey) {
    const fs::path f = write("big.yaml", "trainer: {lr: 1e400, max_steps: 99999999999999999999999}\n");
    const auto r = run_process({llmtrain_bin(), "validate", "--config", f.string()}, "", 30);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(contains(r.out + r.err, "trainer.lr")) << r.out << r.err;
    EXPECT_TRUE(contains(r.out + r.err, "trainer.max_steps")) << r.out << r.err;
}

TEST_F(ParseCliTest, TokenizerErrorsNeverQuoteTheFile) {
    const std::string secret = "admin-token-SECRETSECRET0123456789";
    const fs::path tokens = write("tokens", secret + " alice admin\n");
    const fs::path as_json = write("creds.json", "{\"" + secret + "\": \"" + secret + "\", \"" + secret + "\": 1}");
    const fs::path model_json = write("model.json", "{\"model\": {\"type\": \"" + secret + "\"}}");
    fs::create_directories(dir_ / "pair");
    std::ofstream(dir_ / "pair/vocab.json") << "{\"a\": 0}";
    std::ofstream(dir_ / "pair/merges.txt") << secret << " x y\n";
    for (const fs::path& spec : {tokens, as_json, model_json, dir_ / "pair"}) {
        SCOPED_TRACE(spec.string());
        const auto r = run_process({llmtrain_bin(), "tokenize", "--tokenizer", spec.string()}, "hello", 30);
        EXPECT_EQ(r.exit_code, 2) << r.err;
        EXPECT_TRUE(contains(r.err, spec.string())) << r.err;
        EXPECT_FALSE(contains(r.out + r.err, "SECRET")) << r.err;
    }
}

}  // namespace
