// Idempotency-Key on POST /v1/jobs against a real server whose queue admits nothing: a retried
// submission with the same key and body returns the first job and creates no second row, before and
// after a server restart; the same key with another body is refused; keys are per principal.
#include "server_fixture.h"

namespace {

namespace fs = std::filesystem;
using namespace llmt::testing;

struct Answer {
    int status = 0;
    nlohmann::json body;
    bool replayed = false;
};

Answer submit(int port, const char* token, const std::string& key, const std::string& body) {
    httplib::Client cli("127.0.0.1", port);
    cli.set_read_timeout(60);
    httplib::Headers h = {{"Authorization", std::string("Bearer ") + token}};
    if (!key.empty()) h.emplace("Idempotency-Key", key);
    auto r = cli.Post("/v1/jobs", h, body, "application/json");
    if (!r) return {-1, nullptr, false};
    return {r->status, nlohmann::json::parse(r->body, nullptr, false),
            r->get_header_value("Idempotent-Replayed") == "true"};
}

// Jobs labelled test=idem, as the admin sees them.
size_t labelled_jobs(int port) {
    Api admin(port, kAdminToken);
    const Http r = admin.get("/v1/jobs?label=test=idem&limit=500");
    return r.body.is_object() && r.body.contains("jobs") ? r.body["jobs"].size() : 0;
}

TEST(IdempotencyTest, ARetriedSubmissionReturnsTheFirstJobAndCreatesNoSecondRow) {
    const fs::path root = fs::temp_directory_path() / ("llmt_idempotency_" + std::to_string(::getpid()));
    fs::remove_all(root);
    const std::string body =
        R"({"name": "once", "config": "gpt2_tiny_cpu", "overrides": {"trainer.max_steps": 30}, )"
        R"("labels": {"test": "idem"}})";
    // The same JSON value, written differently: keys in another order, other whitespace.
    const std::string same_body =
        R"({"labels":{"test":"idem"},"overrides":{"trainer.max_steps":30},"config":"gpt2_tiny_cpu","name":"once"})";
    const std::string other_body =
        R"({"name": "twice", "config": "gpt2_tiny_cpu", "overrides": {"trainer.max_steps": 30}, )"
        R"("labels": {"test": "idem"}})";
    int64_t first_id = 0;
    {
        ServeProcess server(root / "srv", {"--capacity", "cpus=0,gpus=0"});
        const Answer first = submit(server.port(), kSubmitterToken, "retry-abc:1", body);
        ASSERT_EQ(first.status, 201) << first.body.dump();
        EXPECT_FALSE(first.replayed);
        first_id = first.body.at("id").get<int64_t>();

        for (const std::string& b : {body, same_body}) {
            const Answer again = submit(server.port(), kSubmitterToken, "retry-abc:1", b);
            EXPECT_EQ(again.status, 201) << again.body.dump();
            EXPECT_TRUE(again.replayed);
            EXPECT_EQ(again.body.value("id", int64_t{0}), first_id);
            EXPECT_EQ(again.body.value("state", ""), "queued");
            EXPECT_EQ(again.body["estimate"], first.body["estimate"]);
        }
        EXPECT_EQ(labelled_jobs(server.port()), 1u);

        const Answer reused = submit(server.port(), kSubmitterToken, "retry-abc:1", other_body);
        EXPECT_EQ(reused.status, 422) << reused.body.dump();
        EXPECT_EQ(reused.body["error"].value("code", ""), "idempotency_key_reused");
        EXPECT_EQ(reused.body["error"].value("field", ""), "Idempotency-Key");
        EXPECT_EQ(labelled_jobs(server.port()), 1u);

        for (const std::string& bad : {std::string(129, 'a'), std::string("has space"), std::string("slash/no")}) {
            const Answer r = submit(server.port(), kSubmitterToken, bad, body);
            EXPECT_EQ(r.status, 400) << bad;
            EXPECT_EQ(r.body["error"].value("code", ""), "invalid_header") << bad;
        }
        EXPECT_EQ(labelled_jobs(server.port()), 1u);

        // Keys are per principal: carol's use of the same key is her own job.
        const Answer carol = submit(server.port(), kOtherSubmitterToken, "retry-abc:1", body);
        EXPECT_EQ(carol.status, 201);
        EXPECT_FALSE(carol.replayed);
        EXPECT_NE(carol.body.value("id", int64_t{0}), first_id);
        EXPECT_EQ(labelled_jobs(server.port()), 2u);
        EXPECT_EQ(server.terminate(), 0);
    }
    // After a restart the key still names the first job.
    ServeProcess server(root / "srv", {"--capacity", "cpus=0,gpus=0"});
    const Answer after = submit(server.port(), kSubmitterToken, "retry-abc:1", body);
    EXPECT_EQ(after.status, 201) << after.body.dump();
    EXPECT_TRUE(after.replayed);
    EXPECT_EQ(after.body.value("id", int64_t{0}), first_id);
    EXPECT_EQ(labelled_jobs(server.port()), 2u);
    // Without a key every submission is a new job, even after keyed ones.
    EXPECT_EQ(submit(server.port(), kSubmitterToken, "", body).status, 201);
    EXPECT_EQ(labelled_jobs(server.port()), 3u);
    server.kill9();
    fs::remove_all(root);
}

}  // namespace
