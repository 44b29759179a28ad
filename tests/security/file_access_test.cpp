// Finding 1 of docs/security.md's Tests list, replayed against a real `llmtrain serve` on loopback: a
// submitter cannot make a job read a file outside the operator's read roots (the server's tokens, a canary
// file), nor write outside its own directory; a job that stays inside runs, with its cache placed in its own
// directory and without the server's secrets in its environment. The canary and the tokens file are watched
// with inotify: no probe may open them. docs/security.md.
#include <sys/inotify.h>

#include "server/server_fixture.h"

namespace {

namespace fs = std::filesystem;
using namespace llmt::testing;
using Json = nlohmann::json;

// A /proc file's bytes ("" when the process is gone or not ours).
std::string slurp(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

class FileAccessTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        root_ = fs::temp_directory_path() / ("llmt_sec_files_" + std::to_string(::getpid()));
        fs::remove_all(root_);
        fs::create_directories(root_ / "outside");
        fs::create_directories(root_ / "allowed");
        std::ofstream(root_ / "outside/canary") << "llmt_canary_0123456789abcdef\n";
        shards_ = prepare_shards(root_ / "allowed");
        fs::create_symlink(root_ / "outside/canary", root_ / "allowed/link_to_canary");
        // A secret in the server's environment that no job may see.
        ::setenv("AWS_SECRET_ACCESS_KEY", "llmt_env_secret_0123456789", 1);
        server_ = new ServeProcess(root_ / "srv", {"--capacity", "cpus=1,gpus=0", "--allow-read",
                                                   (root_ / "allowed").string()});
        ::unsetenv("AWS_SECRET_ACCESS_KEY");
    }
    static void TearDownTestSuite() {
        if (server_) {
            Api admin(server_->port(), kAdminToken);
            cancel_jobs(admin, {"queued", "running"});
        }
        delete server_;
        fs::remove_all(root_);
    }
    static fs::path tokens() { return root_ / "srv/tokens"; }
    static fs::path data_dir() { return root_ / "srv/data"; }
    // A tiny text-source job reading `paths` (plus any data.* keys in `data`).
    static Json text_job(const std::string& name, Json data, int steps = 3) {
        Json cfg = Json::parse(R"({"run": {"name": "t", "device": "cpu", "threads": 1},
            "model": {"n_layer": 1, "n_head": 2, "d_model": 32, "block_size": 32, "vocab_pad_multiple": 64},
            "trainer": {"micro_batch_size": 2, "warmup_steps": 1, "log_every_steps": 1, "eval_every_steps": 0,
                        "save_every_steps": 0}})");
        cfg["trainer"]["max_steps"] = steps;
        cfg["data"] = Json{{"source", "text"}, {"val_fraction", 0.1}};
        cfg["data"].update(data);
        return {{"name", name}, {"config", cfg}};
    }
    // Each refusal, and the server still answering its liveness probe after it.
    static void expect_path_refused(const Http& r, const std::string& field) {
        EXPECT_EQ(Api(server_->port(), "").get("/healthz").status, 200);
        EXPECT_EQ(r.status, 400) << r.text;
        ASSERT_TRUE(r.body.is_object() && r.body.contains("error")) << r.text;
        EXPECT_EQ(r.body["error"]["code"], "path_not_allowed") << r.text;
        EXPECT_EQ(r.body["error"]["field"], field) << r.text;
        EXPECT_EQ(r.text.find("llmt_canary"), std::string::npos) << r.text;  // never the file's bytes
        EXPECT_EQ(r.text.find(kAdminToken), std::string::npos) << r.text;
    }
    static fs::path root_, shards_;
    static ServeProcess* server_;
};
fs::path FileAccessTest::root_;
fs::path FileAccessTest::shards_;
ServeProcess* FileAccessTest::server_ = nullptr;

TEST_F(FileAccessTest, ASubmitterCannotMakeAJobReadOrWriteOutsideTheRoots) {
    // Watch the canary and the server's tokens file: no probe below may open either.
    const int in = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    ASSERT_GE(in, 0);
    ASSERT_GE(::inotify_add_watch(in, (root_ / "outside/canary").c_str(), IN_OPEN | IN_ACCESS), 0);
    ASSERT_GE(::inotify_add_watch(in, tokens().c_str(), IN_OPEN | IN_ACCESS), 0);
    Api bob(server_->port(), kSubmitterToken);
    Api viewer(server_->port(), kViewerToken);
    const std::string canary = (root_ / "outside/canary").string();

    // The finding as written: tokenize the server's own files into the job's artifacts.
    expect_path_refused(
        bob.post("/v1/jobs", text_job("steal", {{"paths", {tokens().string(), canary}},
                                                {"cache_dir", (data_dir() / "jobs/1/runs/job-1/cache").string()}})),
        "data.paths[0]");
    expect_path_refused(
        bob.post("/v1/jobs", text_job("steal", {{"paths", {(root_ / "allowed/corpus.txt").string(), canary}}})),
        "data.paths[1]");
    // The tokenizer that printed the first line of the tokens file.
    expect_path_refused(bob.post("/v1/jobs", text_job("steal", {{"paths", {(root_ / "allowed/corpus.txt").string()}},
                                                                 {"tokenizer", tokens().string()}})),
                        "data.tokenizer");
    // The same through the presets, overrides, globs, a symlink in an allowed root, "..", and estimate.
    Json preset = {{"name", "steal"}, {"config", "gpt2_tiny_cpu"}};
    preset["overrides"] = {{"data.train_shards", (root_ / "outside/*").string()}};
    expect_path_refused(bob.post("/v1/jobs", preset), "data.train_shards");
    preset["overrides"] = {{"data.train_shards", (root_ / "allowed/*/../../outside/*").string()}};
    expect_path_refused(bob.post("/v1/jobs", preset), "data.train_shards");
    preset["overrides"] = {{"model.init_from", canary}};
    expect_path_refused(bob.post("/v1/jobs", preset), "model.init_from");
    expect_path_refused(
        bob.post("/v1/jobs", text_job("steal", {{"paths", {(root_ / "allowed/link_to_canary").string()}}})),
        "data.paths[0]");
    expect_path_refused(
        bob.post("/v1/jobs", text_job("steal", {{"paths", {(root_ / "allowed/../outside/canary").string()}}})),
        "data.paths[0]");
    expect_path_refused(viewer.post("/v1/estimate", text_job("steal", {{"paths", {canary}}})), "data.paths[0]");
    // The server's data dir is never readable, even when an operator's root contains it.
    expect_path_refused(bob.post("/v1/jobs", text_job("steal", {{"paths", {(data_dir() / "jobs").string()}}})),
                        "data.paths[0]");
    // Writes: only relative paths, placed in the job's own directory.
    for (const std::string& dir : {(root_ / "outside/made_by_job").string(), std::string("../../outside/made_by_job")})
        expect_path_refused(
            bob.post("/v1/jobs",
                     text_job("write", {{"paths", {(root_ / "allowed/corpus.txt").string()}}, {"cache_dir", dir}})),
            "data.cache_dir");
    EXPECT_FALSE(fs::exists(root_ / "outside/made_by_job"));
    EXPECT_TRUE(fs::is_empty(data_dir() / "jobs")) << "a refused submit created a job directory";

    char buf[4096];
    const ssize_t n = ::read(in, buf, sizeof buf);
    EXPECT_EQ(n, -1) << "a probe opened the canary or the tokens file (" << n << " bytes of inotify events)";
    ::close(in);
}

TEST_F(FileAccessTest, AJobInsideTheRootsRunsWithItsCacheInItsOwnDirectoryAndNoServerSecrets) {
    Api bob(server_->port(), kSubmitterToken);
    auto r = bob.post("/v1/jobs", text_job("inside", {{"paths", {(root_ / "allowed/corpus.txt").string()}},
                                                     {"cache_dir", "mycache"}}, 400));
    ASSERT_EQ(r.status, 201) << r.text;
    const std::string id = std::to_string(r.body["id"].get<int64_t>());
    const fs::path job_dir = data_dir() / "jobs" / id;
    // While it runs: the trainer's environment (found by its --config argument) has no server secret.
    const std::string config_arg = (job_dir / "config.yaml").string();
    std::string environ_text;
    ASSERT_TRUE(wait_for([&] {
        std::error_code ec;
        for (const auto& p : fs::directory_iterator("/proc", ec)) {
            const std::string cmd = slurp(p.path() / "cmdline");
            if (cmd.find(config_arg) == std::string::npos || cmd.find("train") == std::string::npos) continue;
            environ_text = slurp(p.path() / "environ");
            return !environ_text.empty();
        }
        return false;
    }, 120)) << server_->log();
    EXPECT_EQ(environ_text.find("llmt_env_secret"), std::string::npos);
    EXPECT_NE(environ_text.find("HOME=" + job_dir.string()), std::string::npos);
    // Once it trains, its tokenized cache exists.
    const fs::path metrics = job_dir / "runs" / ("job-" + id) / "metrics.jsonl";
    EXPECT_TRUE(wait_for([&] { return fs::exists(metrics); }, 180)) << server_->log();
    Api admin(server_->port(), kAdminToken);
    cancel_jobs(admin, {"running", "queued"});
    // The relative cache_dir was placed in the job's directory, and nothing was written beside the server.
    EXPECT_TRUE(fs::is_directory(job_dir / "mycache")) << llmt::read_file(job_dir / "config.yaml");
    EXPECT_NE(llmt::read_file(job_dir / "config.yaml").find((job_dir / "mycache").string()), std::string::npos);
}

}  // namespace
