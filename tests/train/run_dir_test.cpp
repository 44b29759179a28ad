// Run directories: unique sortable ids, resolved config + meta written, never overwritten.
#include "train/run_dir.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <regex>
#include <set>

#include "config/loader.h"
#include "core/error.h"
#include "core/fs.h"

namespace llmt::train {
namespace {

class RunDirTest : public ::testing::Test {
protected:
    void SetUp() override {
        root_ = std::filesystem::temp_directory_path() / ("llmt_rundir_" + std::to_string(::getpid()));
        std::filesystem::remove_all(root_);
    }
    void TearDown() override { std::filesystem::remove_all(root_); }
    config::Config cfg(const std::string& run_id = "") {
        std::vector<std::string> sets = {"output.root_dir=" + root_.string()};
        if (!run_id.empty()) sets.push_back("output.run_id=" + run_id);
        return config::load_config_string("run: {name: tiny}\ndata: {train_shards: a, val_shards: b}\n", "t.yaml",
                                          sets);
    }
    std::filesystem::path root_;
};

TEST_F(RunDirTest, IdsAreUniqueAndShaped) {
    std::set<std::string> ids;
    // 20,000 independent 24-bit draws would collide with near certainty (expected ~12 pairs); one process's ids
    // must not.
    for (int i = 0; i < 20000; ++i) ids.insert(RunDir::make_run_id("tiny"));
    EXPECT_EQ(ids.size(), 20000u);
    EXPECT_TRUE(std::regex_match(*ids.begin(), std::regex(R"(tiny-\d{8}T\d{6}Z-[0-9a-f]{6})"))) << *ids.begin();
}

TEST_F(RunDirTest, CreatesConfigAndMeta) {
    RunMeta meta{{"llmtrain", "train"}, 2, "cpu", {{"configured", "auto"}, {"chosen", "fp32"}}};
    auto rd = RunDir::create(cfg(), meta);
    EXPECT_TRUE(std::filesystem::is_directory(rd.logs_dir()));
    EXPECT_TRUE(std::filesystem::is_directory(rd.checkpoints_dir()));
    // config.yaml is the resolved config and loads back to the same values.
    auto again = config::load_config_file(rd.config_path());
    EXPECT_EQ(again.resolved, cfg().resolved);
    auto m = nlohmann::json::parse(read_file(rd.meta_path()));
    for (const char* k : {"llmtrain_version", "git_sha", "argv", "hostname", "pid", "start_time_utc", "world_size",
                          "device"})
        EXPECT_TRUE(m.contains(k)) << k;
    EXPECT_EQ(m["world_size"], 2);
    EXPECT_EQ(m["run_id"], rd.run_id());
    EXPECT_EQ(m["precision"]["chosen"], "fp32");  // trainer.precision as resolved (train/cpu_precision.h)
}

TEST_F(RunDirTest, ExistingRunIsNeverOverwritten) {
    RunDir::create(cfg("fixed"), {});
    write_file_atomic(root_ / "fixed" / "metrics.jsonl", "{\"step\":1}\n");
    try {
        RunDir::create(cfg("fixed"), {});
        FAIL() << "second create must refuse";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("already exists"), std::string::npos);
        EXPECT_NE(std::string(e.what()).find("--resume"), std::string::npos);
    }
    EXPECT_EQ(read_file(root_ / "fixed" / "metrics.jsonl"), "{\"step\":1}\n");
    EXPECT_NO_THROW(RunDir::open(root_ / "fixed"));
    EXPECT_THROW(RunDir::open(root_ / "nope"), InputError);
}

TEST_F(RunDirTest, AGeneratedIdThatIsTakenIsDrawnAgain) {
    // The next generated id is predictable within one second (the suffix steps by one), so it can be taken first,
    // as another process starting in the same second could take it.
    const auto config = cfg();
    bool exercised = false;
    for (int attempt = 0; attempt < 10 && !exercised; ++attempt) {
        const std::string probe = RunDir::make_run_id("tiny");
        const std::string stamp = probe.substr(0, probe.size() - 6);
        const auto next =
            fmt::format("{}{:06x}", stamp, (std::stoul(probe.substr(probe.size() - 6), nullptr, 16) + 1) & 0xFFFFFFu);
        std::filesystem::create_directories(root_ / next);
        const auto rd = RunDir::create(config, {});
        EXPECT_NE(rd.run_id(), next);
        EXPECT_TRUE(std::filesystem::exists(rd.config_path()));
        exercised = RunDir::make_run_id("tiny").rfind(stamp, 0) == 0;  // still the same second: `next` was drawn
    }
    EXPECT_TRUE(exercised) << "ten attempts each crossed a second boundary";
}

}  // namespace
}  // namespace llmt::train
