// A job's disk, bounded while it runs, replayed against a real `llmtrain serve` with a real tiny job:
// `save_every_steps: 1` with a huge `keep_last` (the shape that wrote 1.1 GB in 60 steps) under a small
// per-submitter `max_disk_mb`. The job is stopped the way a cancel stops it and fails with the reason
// in GET /v1/jobs/N; what it left stays near the limit; its last checkpoint is complete, and a job
// resumed from it loads it and trains on. docs/security.md "Load limits", docs/server.md "Disk quotas".
#include <cstdio>
#include <regex>
#include <string>

#include "server/jobs/job_resume.h"
#include "server/server_fixture.h"

namespace {

namespace fs = std::filesystem;
using namespace llmt::testing;

// bob's max_disk_mb: five checkpoints of the tiny model (20 MB each: its GPT-2 vocabulary's embedding
// with the optimizer's moments), so a job resumed from one fits under it.
constexpr int kLimitMb = 100;

class DiskQuotaTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        root_ = fs::temp_directory_path() / ("llmt_disk_quota_" + std::to_string(::getpid()));
        shards_ = prepare_shards(root_);
        fs::create_directories(root_ / "srv");
        llmt::write_file_atomic(root_ / "srv/quotas.json",
                                "{\"submitter:bob\": {\"max_disk_mb\": " + std::to_string(kLimitMb) + "}}");
        server_ = new ServeProcess(root_ / "srv", {"--capacity", "cpus=1,gpus=0", "--quotas-file",
                                                   (root_ / "srv/quotas.json").string(), "--disk-check-s", "0.25"});
    }
    static void TearDownTestSuite() {
        if (!server_) return;
        Api admin(server_->port(), kAdminToken);
        cancel_jobs(admin, {"running", "queued", "retrying"});
        delete server_;
        fs::remove_all(root_);
    }
    // A checkpoint at every step, none ever rotated away.
    static std::string hoarding_config(int steps) {
        std::string c = tiny_config(shards_, steps, 1);
        return std::regex_replace(c, std::regex("keep_last: 2"), "keep_last: 1000000");
    }
    static fs::path job_dir(int64_t id) { return root_ / "srv/data/jobs" / std::to_string(id); }
    static fs::path run_dir(int64_t id) { return job_dir(id) / "runs" / ("job-" + std::to_string(id)); }
    // Bytes of the regular files below `dir` (their lengths: independent of the server's block count).
    static uint64_t file_bytes(const fs::path& dir) {
        uint64_t n = 0;
        for (const auto& e : fs::recursive_directory_iterator(dir))
            if (e.is_regular_file() && !e.is_symlink()) n += e.file_size();
        return n;
    }
    static int highest_step(const fs::path& run) {
        int most = -1;
        for (const auto& e : fs::directory_iterator(run / "checkpoints")) {
            const std::string name = e.path().filename().string();
            if (e.is_directory() && name.rfind("step_", 0) == 0) most = std::max(most, std::stoi(name.substr(5)));
        }
        return most;
    }
    static fs::path root_, shards_;
    static ServeProcess* server_;
};
fs::path DiskQuotaTest::root_, DiskQuotaTest::shards_;
ServeProcess* DiskQuotaTest::server_ = nullptr;

TEST_F(DiskQuotaTest, AJobPastItsSubmittersDiskQuotaIsStoppedWithItsLastCheckpointKept) {
    Api bob(server_->port(), kSubmitterToken);
    auto submitted = bob.post("/v1/jobs", nlohmann::json{{"name", "hoarder"}, {"config", hoarding_config(1000000)}});
    ASSERT_EQ(submitted.status, 201) << submitted.text;
    const int64_t id = submitted.body["id"];
    const std::string path = "/v1/jobs/" + std::to_string(id);
    ASSERT_TRUE(wait_for([&] { return bob.get(path).body.value("state", "") == "failed"; }, 300))
        << bob.get(path).text << server_->log();

    const Http job = bob.get(path);
    const std::string reason = job.body.value("reason", "");
    EXPECT_TRUE(std::regex_search(reason, std::regex(R"(^disk_quota_exceeded \(used [0-9.]+ MB > limit )" +
                                                     std::to_string(kLimitMb) + R"( MB for submitter bob\))")))
        << reason;
    EXPECT_NE(reason.find("exit code 143"), std::string::npos) << "stopped by SIGTERM as a cancel is: " << reason;
    const std::string history = job.body.at("history").dump();
    EXPECT_NE(history.find("SIGTERM sent (disk_quota_exceeded"), std::string::npos) << history;
    EXPECT_EQ(job.body.at("attempts"), 1) << "a job over its disk quota is not retried";

    // What it left: over the limit (it passed it) but near it, where without the check it would have
    // gone on to a million checkpoints. Near: the checkpoints of one check interval (0.25 s), the walk that
    // measures them, and the one written on SIGTERM, 20 MB each: on a loaded 2-core machine up to about
    // five, so three times the limit (a fresh Debian root left 217.6 MB, this machine 138-158 MB).
    const uint64_t used = file_bytes(job_dir(id));
    const uint64_t limit = uint64_t{kLimitMb} << 20;
    std::printf("job %lld left %.1f MB for a limit of %d MB; reason: %s\n", static_cast<long long>(id),
                static_cast<double>(used) / (1 << 20), kLimitMb, reason.c_str());
    EXPECT_GT(used, limit);
    EXPECT_LT(used, 3 * limit) << used << " bytes left for a limit of " << limit << "; " << reason << "; "
                               << highest_step(run_dir(id)) << " checkpoints; " << history;

    // The last checkpoint is complete (the one `latest` names is the highest written) and loads: a job
    // resumed from it continues at its step.
    const fs::path run = run_dir(id);
    const auto latest = llmt::server::latest_checkpoint(run);
    ASSERT_TRUE(latest.has_value());
    const int last = highest_step(run);
    ASSERT_GT(last, 1);
    EXPECT_EQ(latest->filename().string(), "step_" + std::to_string(last));
    auto resumed = bob.post("/v1/jobs", nlohmann::json{{"name", "resumed"},
                                                       {"config", hoarding_config(last + 2)},
                                                       {"resume_from", id}});
    ASSERT_EQ(resumed.status, 201) << resumed.text;
    const std::string rpath = "/v1/jobs/" + std::to_string(resumed.body["id"].get<int64_t>());
    ASSERT_TRUE(wait_for([&] { return bob.get(rpath).body.value("state", "") == "succeeded"; }, 300))
        << bob.get(rpath).text << server_->log();
    const std::string log = bob.get(rpath + "/logs").text;
    EXPECT_NE(log.find("at step " + std::to_string(last)), std::string::npos) << log;
}

}  // namespace
