// The disk check's parts: what a job's directory takes (links not followed, hard links once, the walk
// bounded) and which running jobs a set of limits stops (per job, per submitter, per label, newest
// first), and the quotas file's max_disk_mb.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "core/fs.h"
#include "server/scheduler/admission.h"
#include "server/scheduler/disk_usage.h"

namespace {

namespace fs = std::filesystem;
using namespace llmt::server;

constexpr uint64_t kMiB = uint64_t{1} << 20;

class DiskUsageTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("llmt_disk_" + std::to_string(::getpid()) + "_" +
                                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_ / "job");
    }
    void TearDown() override { fs::remove_all(dir_); }
    // A file of `bytes` written (not sparse), so it has that many bytes of blocks.
    static void write(const fs::path& p, size_t bytes) {
        fs::create_directories(p.parent_path());
        std::ofstream(p, std::ios::binary) << std::string(bytes, 'x');
    }
    fs::path dir_;
};

TEST_F(DiskUsageTest, CountsWrittenBlocksOfEveryFileBelow) {
    write(dir_ / "job/runs/job-1/checkpoints/step_1/model.safetensors", 3 * kMiB);
    write(dir_ / "job/runs/job-1/checkpoints/step_2/model.safetensors", 2 * kMiB);
    write(dir_ / "job/logs/job.log", 1000);
    const DirUsage u = measure_dir(dir_ / "job", kMaxDiskEntriesPerJob);
    EXPECT_GE(u.bytes, 5 * kMiB);
    EXPECT_LT(u.bytes, 5 * kMiB + 256 * 1024);  // blocks and directories: a few KiB each, not more
    EXPECT_FALSE(u.truncated);
    EXPECT_EQ(u.entries, 10u);  // job itself, runs, job-1, checkpoints, 2 steps, 2 files, logs, job.log
}

TEST_F(DiskUsageTest, SparseFilesCountTheirBlocksNotTheirLength) {
    {
        std::ofstream f(dir_ / "job/sparse", std::ios::binary);
    }
    fs::resize_file(dir_ / "job/sparse", 512 * kMiB);  // a length with no data behind it
    EXPECT_LT(measure_dir(dir_ / "job", 100).bytes, kMiB);
}

TEST_F(DiskUsageTest, LinksAreNotFollowedAndHardLinksCountOnce) {
    write(dir_ / "outside/big.bin", 8 * kMiB);
    write(dir_ / "outside/tree/also_big.bin", 8 * kMiB);
    fs::create_symlink(dir_ / "outside/big.bin", dir_ / "job/to_file");
    fs::create_directory_symlink(dir_ / "outside/tree", dir_ / "job/to_dir");
    fs::create_symlink(dir_ / "job", dir_ / "job/loop");  // would never end if followed
    write(dir_ / "job/ckpt.bin", 2 * kMiB);
    fs::create_hard_link(dir_ / "job/ckpt.bin", dir_ / "job/ckpt_link.bin");
    const DirUsage u = measure_dir(dir_ / "job", kMaxDiskEntriesPerJob);
    EXPECT_GE(u.bytes, 2 * kMiB);
    EXPECT_LT(u.bytes, 3 * kMiB) << "a link's target or a hard link's second name was counted";
}

TEST_F(DiskUsageTest, MissingDirectoryIsZeroAndTheWalkIsBounded) {
    EXPECT_EQ(measure_dir(dir_ / "no_such", 10).bytes, 0u);
    for (int i = 0; i < 50; ++i) write(dir_ / "job" / ("f" + std::to_string(i)), 10);
    const DirUsage u = measure_dir(dir_ / "job", 20);
    EXPECT_TRUE(u.truncated);
    EXPECT_EQ(u.entries, 20u);
    EXPECT_FALSE(measure_dir(dir_ / "job", 51).truncated);
}

JobDiskUse job(int64_t id, const std::string& who, double started, uint64_t mb,
               std::map<std::string, std::string> labels = {}) {
    return JobDiskUse{id, who, std::move(labels), started, mb * kMiB, false};
}

TEST(DiskLimits, PerJobDefaultStopsOnlyTheJobOverIt) {
    const auto stops = jobs_over_disk_limits({job(1, "bob", 10, 99), job(2, "bob", 20, 101)}, Quotas{}, 100);
    ASSERT_EQ(stops.size(), 1u);
    EXPECT_EQ(stops[0].id, 2);
    EXPECT_EQ(stops[0].reason, "disk_quota_exceeded (used 101.0 MB > limit 100 MB for job 2 (--max-job-disk-mb))");
    EXPECT_TRUE(jobs_over_disk_limits({job(2, "bob", 20, 100)}, Quotas{}, 100).empty()) << "at the limit is within it";
    EXPECT_TRUE(jobs_over_disk_limits({job(2, "bob", 20, 1 << 20)}, Quotas{}, 0).empty()) << "0: no per-job limit";
}

TEST(DiskLimits, SubmitterTotalStopsTheNewestJobsUntilUnderIt) {
    Quotas q;
    q.submitters["bob"].max_disk_mb = 100;
    // bob's three jobs hold 120 MB together: stopping the newest (30 MB) brings them to 90.
    const auto stops = jobs_over_disk_limits(
        {job(1, "bob", 10, 50), job(3, "bob", 30, 30), job(2, "bob", 20, 40), job(4, "carol", 40, 500)}, q, 0);
    ASSERT_EQ(stops.size(), 1u);
    EXPECT_EQ(stops[0].id, 3);
    EXPECT_EQ(stops[0].reason, "disk_quota_exceeded (used 120.0 MB > limit 100 MB for submitter bob)");
    // 150 MB: stopping the newest leaves 120, so the next newest goes too.
    const auto two =
        jobs_over_disk_limits({job(1, "bob", 10, 80), job(2, "bob", 20, 40), job(3, "bob", 30, 30)}, q, 0);
    ASSERT_EQ(two.size(), 2u);
    EXPECT_EQ(two[0].id, 2);
    EXPECT_EQ(two[1].id, 3);
}

TEST(DiskLimits, AnySubmitterEntryAppliesToThoseWithoutTheirOwn) {
    Quotas q;
    q.any_submitter.max_disk_mb = 10;
    q.submitters["bob"].max_disk_mb = -1;  // bob's own entry, without a disk limit
    const auto stops = jobs_over_disk_limits({job(1, "bob", 10, 50), job(2, "carol", 20, 11)}, q, 0);
    ASSERT_EQ(stops.size(), 1u);
    EXPECT_EQ(stops[0].id, 2);
    EXPECT_NE(stops[0].reason.find("for submitter carol"), std::string::npos) << stops[0].reason;
}

TEST(DiskLimits, LabelTotalCountsTheLabelsJobsOfEverySubmitter) {
    Quotas q;
    q.labels["team=nlp"].max_disk_mb = 60;
    const auto stops = jobs_over_disk_limits({job(1, "bob", 10, 40, {{"team", "nlp"}}),
                                              job(2, "carol", 20, 30, {{"team", "nlp"}}),
                                              job(3, "carol", 30, 90, {{"team", "cv"}})},
                                             q, 0);
    ASSERT_EQ(stops.size(), 1u);
    EXPECT_EQ(stops[0].id, 2);
    EXPECT_EQ(stops[0].reason, "disk_quota_exceeded (used 70.0 MB > limit 60 MB for label team=nlp)");
}

TEST(DiskLimits, AJobIsStoppedOnceAndAStoppedJobLeavesTheTotals) {
    Quotas q;
    q.submitters["bob"].max_disk_mb = 100;
    // Job 3 is over the per-job limit; without it bob's jobs hold 90 MB, under his total.
    const auto stops =
        jobs_over_disk_limits({job(1, "bob", 10, 50), job(2, "bob", 20, 40), job(3, "bob", 5, 60)}, q, 55);
    ASSERT_EQ(stops.size(), 1u);
    EXPECT_EQ(stops[0].id, 3);
    EXPECT_NE(stops[0].reason.find("--max-job-disk-mb"), std::string::npos) << stops[0].reason;
}

TEST(DiskLimits, AWalkCutShortStopsTheJob) {
    JobDiskUse many = job(7, "bob", 10, 1);
    many.truncated = true;
    const auto stops = jobs_over_disk_limits({many}, Quotas{}, 0);
    ASSERT_EQ(stops.size(), 1u);
    EXPECT_NE(stops[0].reason.find("more than 200000 files and directories"), std::string::npos) << stops[0].reason;
}

TEST_F(DiskUsageTest, QuotasFileReadsMaxDiskMbForLabelsAndSubmitters) {
    const fs::path f = dir_ / "quotas.json";
    llmt::write_file_atomic(f, R"({"team=nlp": {"max_running": 2, "max_disk_mb": 2048},
                                   "submitter:bob": {"max_disk_mb": 100}, "submitter:*": {"max_disk_mb": 50}})");
    const Quotas q = load_quotas(f);
    EXPECT_EQ(q.labels.at("team=nlp").max_disk_mb, 2048);
    EXPECT_EQ(q.of_submitter("bob").max_disk_mb, 100);
    EXPECT_EQ(q.of_submitter("zed").max_disk_mb, 50);
    EXPECT_EQ(Quotas{}.of_submitter("zed").max_disk_mb, -1) << "no disk limit per submitter by default";
    for (const char* bad :
         {R"({"team=nlp": {"max_disk_mb": 1.5}})", R"({"team=nlp": {"max_disk_mb": -1}})",
          R"({"submitter:bob": {"max_disk_mb": "10"}})", R"({"submitter:bob": {"max_disk_mb": -3}})"}) {
        llmt::write_file_atomic(f, bad);
        try {
            load_quotas(f);
            ADD_FAILURE() << "accepted " << bad;
        } catch (const llmt::InputError& e) {
            EXPECT_NE(std::string(e.what()).find("max_disk_mb"), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find("quotas.json"), std::string::npos) << e.what();
        }
    }
}

}  // namespace
