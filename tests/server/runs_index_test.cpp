// RunsIndex (serve --runs-dir): which directories are runs, cursor pagination, and confinement: a
// symlinked run, a file symlinked out of its run, odd names and `..` never reach a path outside the
// root; a half-written run and one without metrics are listed with what they have.
#include "server/runs/runs_index.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "core/error.h"
#include "server/runs/metrics_index.h"

namespace {

namespace fs = std::filesystem;
using llmt::server::IndexedRun;
using llmt::server::MetricsIndex;
using llmt::server::RunsIndex;
using namespace std::chrono_literals;

class RunsIndexTest : public ::testing::Test {
protected:
    void SetUp() override {
        base_ = fs::temp_directory_path() /
                ("llmt_runs_index_" + std::to_string(::getpid()) + "_" +
                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(base_);
        root_ = base_ / "runs";
        outside_ = base_ / "outside";
        fs::create_directories(root_);
        fs::create_directories(outside_);
        write(outside_ / "secret.jsonl", "{\"step\": 1, \"loss\": 9.0}\n");
        write(outside_ / "meta.json", "{}\n");
    }
    void TearDown() override { fs::remove_all(base_); }
    static void write(const fs::path& p, const std::string& text) {
        fs::create_directories(p.parent_path());
        std::ofstream(p, std::ios::binary) << text;
    }
    // A finished run as `llmtrain train` leaves it.
    void make_run(const std::string& name, int steps = 3) {
        const fs::path d = root_ / name;
        write(d / "config.yaml", "run: {name: t}\n");
        write(d / "meta.json", "{\"run_id\": \"" + name + "\", \"start_time_utc\": \"2026-11-29T02:00:00Z\"}\n");
        std::string m;
        for (int s = 1; s <= steps; ++s)
            m += "{\"step\": " + std::to_string(s) + ", \"loss\": " + std::to_string(5.0 - s) + "}\n";
        write(d / "metrics.jsonl", m);
        write(d / "logs/rank0.log", "step 1\nstep 2\n");
    }
    std::vector<std::string> names(const RunsIndex& idx) {
        std::vector<std::string> out;
        for (const auto& r : idx.list("", 1000).runs) out.push_back(r.name);
        return out;
    }
    fs::path base_, root_, outside_;
};

TEST_F(RunsIndexTest, ListsRunDirectoriesSortedAndPagesThemWithACursor) {
    for (const char* n : {"b-run", "a-run", "c-run"}) make_run(n);
    fs::create_directories(root_ / "not-a-run/checkpoints");  // none of a run's files
    write(root_ / "stray.txt", "x");
    RunsIndex idx({root_}, 10s);
    EXPECT_EQ(names(idx), (std::vector<std::string>{"a-run", "b-run", "c-run"}));
    auto p1 = idx.list("", 2);
    ASSERT_EQ(p1.runs.size(), 2u);
    EXPECT_EQ(p1.total, 3u);
    ASSERT_TRUE(p1.next_after);
    EXPECT_EQ(*p1.next_after, "0/b-run");
    auto p2 = idx.list(*p1.next_after, 2);
    ASSERT_EQ(p2.runs.size(), 1u);
    EXPECT_EQ(p2.runs[0].name, "c-run");
    EXPECT_FALSE(p2.next_after);
    EXPECT_TRUE(idx.list("garbage", 5).runs.size() == 3u);  // a malformed cursor starts over
    EXPECT_EQ(p2.runs[0].dir, fs::canonical(root_ / "c-run"));
}

TEST_F(RunsIndexTest, SecondRootGetsItsOwnIndexAndAMissingRootIsAUsageError) {
    make_run("x");
    const fs::path other = base_ / "more";
    fs::create_directories(other);
    make_run("y");
    fs::rename(root_ / "y", other / "y");
    RunsIndex idx({root_, other}, 10s);
    auto all = idx.list("", 10).runs;
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(all[1].key(), "1/y");
    EXPECT_TRUE(idx.find(1, "y"));
    EXPECT_FALSE(idx.find(0, "y"));
    EXPECT_THROW(RunsIndex({base_ / "absent"}, 10s), llmt::UsageError);
    write(base_ / "plain", "x");
    EXPECT_THROW(RunsIndex({base_ / "plain"}, 10s), llmt::UsageError);
}

TEST_F(RunsIndexTest, SymlinksOutOfTheRootAndOddNamesAreNotRuns) {
    make_run("good");
    fs::create_symlink(outside_, root_ / "linked");          // a run directory that is a symlink
    make_run("..hidden");                                     // starts with a dot
    fs::create_directories(root_ / "sp ace");
    write(root_ / "sp ace/meta.json", "{}");
    RunsIndex idx({root_}, 10s);
    EXPECT_EQ(names(idx), (std::vector<std::string>{"good"}));
    EXPECT_FALSE(idx.find(0, "linked"));
    EXPECT_FALSE(idx.find(0, ".."));
    EXPECT_FALSE(idx.find(0, "../outside"));
    EXPECT_FALSE(idx.find(7, "good"));
}

TEST_F(RunsIndexTest, AFileSymlinkedOutOfItsRunIsNotReadAndNoRelativePathClimbs) {
    make_run("r");
    fs::remove(root_ / "r/metrics.jsonl");
    fs::create_symlink(outside_ / "secret.jsonl", root_ / "r/metrics.jsonl");
    fs::create_symlink(outside_, root_ / "r/logs/up");
    RunsIndex idx({root_}, 10s);
    auto run = idx.find(0, "r");
    ASSERT_TRUE(run);
    EXPECT_FALSE(RunsIndex::file(*run, "metrics.jsonl"));
    EXPECT_FALSE(RunsIndex::file(*run, "logs/up/secret.jsonl"));
    EXPECT_FALSE(RunsIndex::file(*run, "../../outside/secret.jsonl"));
    EXPECT_FALSE(RunsIndex::file(*run, "logs"));  // a directory is not a file
    EXPECT_TRUE(RunsIndex::file(*run, "logs/rank0.log"));
    // A symlink that stays inside the run is followed.
    fs::create_symlink(root_ / "r/config.yaml", root_ / "r/summary.json");
    EXPECT_EQ(*RunsIndex::file(*run, "summary.json"), fs::canonical(root_ / "r/config.yaml"));
}

TEST_F(RunsIndexTest, AHalfWrittenRunIsListedAndItsPartialMetricsLineIsNotServed) {
    // A run caught while starting: config.yaml only, then a metrics line still being written.
    write(root_ / "starting/config.yaml", "run: {name: t}\n");
    RunsIndex idx({root_}, 0ms);
    auto run = idx.find(0, "starting");
    ASSERT_TRUE(run);
    EXPECT_FALSE(RunsIndex::file(*run, "meta.json"));
    EXPECT_FALSE(RunsIndex::file(*run, "metrics.jsonl"));
    write(root_ / "starting/metrics.jsonl", "{\"step\": 1, \"loss\": 4.0}\n{\"step\": 2, \"lo");
    MetricsIndex metrics;
    auto got = metrics.since(*RunsIndex::file(*run, "metrics.jsonl"), -1);
    ASSERT_EQ(got.points.size(), 1u);
    EXPECT_EQ(got.last_step, 1);
    // A directory that appears later is found by the next scan (interval 0: every refresh).
    make_run("later");
    EXPECT_FALSE(idx.find(0, "later"));
    idx.refresh();
    EXPECT_TRUE(idx.find(0, "later"));
}

TEST_F(RunsIndexTest, ARunWithoutMetricsHasNoMetricsFileAndNoLogRanks) {
    write(root_ / "bare/meta.json", "{\"run_id\": \"bare\"}\n");
    RunsIndex idx({root_}, 10s);
    auto run = idx.find(0, "bare");
    ASSERT_TRUE(run);
    EXPECT_FALSE(RunsIndex::file(*run, "metrics.jsonl"));
    EXPECT_TRUE(RunsIndex::log_ranks(*run).empty());
    make_run("full");
    write(root_ / "full/logs/rank3.log", "x\n");
    write(root_ / "full/logs/rankx.log", "x\n");
    fs::create_symlink(outside_ / "secret.jsonl", root_ / "full/logs/rank5.log");
    idx.rescan();
    EXPECT_EQ(RunsIndex::log_ranks(*idx.find(0, "full")), (std::vector<int>{0, 3}));
}

TEST_F(RunsIndexTest, ScanningWritesNothing) {
    make_run("r");
    auto before = fs::last_write_time(root_ / "r");
    size_t files = 0;
    for (auto& e : fs::recursive_directory_iterator(root_)) files += e.is_regular_file() ? 1 : 0;
    RunsIndex idx({root_}, 0ms);
    for (int i = 0; i < 3; ++i) idx.refresh();
    MetricsIndex metrics;
    metrics.since(*RunsIndex::file(*idx.find(0, "r"), "metrics.jsonl"), -1);
    size_t after = 0;
    for (auto& e : fs::recursive_directory_iterator(root_)) after += e.is_regular_file() ? 1 : 0;
    EXPECT_EQ(after, files);
    EXPECT_EQ(fs::last_write_time(root_ / "r"), before);
}

}  // namespace
