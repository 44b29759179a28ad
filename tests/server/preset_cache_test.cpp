// PresetCache: a preset is parsed once per file version and override list, and any change to the file
// (another size, an in-place edit with a new mtime, a rename over it, its removal) is seen by the next
// lookup. Override lists that fail validation are refused again with the same issues and never kept;
// distinct override lists (they come from clients) are kept within PresetCache::kMaxBytes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "config/loader.h"
#include "core/fs.h"
#include "server/estimate/preset_cache.h"

namespace {

namespace fs = std::filesystem;
using llmt::server::PresetCache;

const char* kPreset = R"(run: {name: cached, device: cpu}
model: {arch: gpt2, n_layer: 2, n_head: 2, d_model: 64, block_size: 32, vocab_size: 256}
trainer: {max_steps: 111, micro_batch_size: 2, eval_every_steps: 0}
data: {train_shards: shards/train_*.bin}
)";

class PresetCacheTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("llmt_preset_cache_" + std::to_string(::getpid()) + "_" +
                                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_);
        llmt::write_file_atomic(dir_ / "p.yaml", kPreset);
    }
    void TearDown() override { fs::remove_all(dir_); }
    // Rewrites the file in place (same inode), as an editor that does not rename would.
    void edit_in_place(const std::string& text) const {
        FILE* f = std::fopen((dir_ / "p.yaml").c_str(), "r+");
        ASSERT_NE(f, nullptr);
        ASSERT_EQ(::ftruncate(fileno(f), 0), 0);
        std::fwrite(text.data(), 1, text.size(), f);
        std::fclose(f);
    }
    int64_t max_steps(PresetCache& c, const std::vector<std::string>& sets = {}) {
        auto loaded = c.load("p", sets);
        if (!loaded) return -1;
        return (*loaded)->config.trainer.max_steps;
    }
    fs::path dir_;
};

TEST_F(PresetCacheTest, SecondLookupIsAHitAndSharesTheConfig) {
    PresetCache c(dir_);
    auto a = c.load("p", {"trainer.lr=0.01"});
    auto b = c.load("p", {"trainer.lr=0.01"});
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->get(), b->get());
    EXPECT_DOUBLE_EQ((*a)->config.trainer.lr, 0.01);
    EXPECT_NE((*a)->config_yaml.find("lr: 0.01"), std::string::npos) << (*a)->config_yaml;
    EXPECT_EQ(c.misses(), 1u);
    EXPECT_EQ(c.hits(), 1u);
    // Another override list is its own entry.
    EXPECT_EQ(max_steps(c, {"trainer.max_steps=500"}), 500);
    EXPECT_EQ(c.misses(), 2u);
    EXPECT_FALSE(c.load("missing", {}));
}

TEST_F(PresetCacheTest, AnEditedPresetIsSeenByTheNextLookup) {
    PresetCache c(dir_);
    EXPECT_EQ(max_steps(c), 111);
    // Another size.
    std::string text = kPreset;
    text.replace(text.find("111"), 3, "2222");
    edit_in_place(text);
    EXPECT_EQ(max_steps(c), 2222);
    // Same size, in place: the new mtime tells (set explicitly, so the test does not depend on the
    // clock's granularity).
    text.replace(text.find("2222"), 4, "3333");
    const auto before = fs::last_write_time(dir_ / "p.yaml");
    edit_in_place(text);
    fs::last_write_time(dir_ / "p.yaml", before + std::chrono::seconds(1));
    EXPECT_EQ(max_steps(c), 3333);
    // Renamed over (a new inode), as write_file_atomic and most editors do.
    text.replace(text.find("3333"), 4, "4444");
    llmt::write_file_atomic(dir_ / "p.yaml", text);
    EXPECT_EQ(max_steps(c), 4444);
    EXPECT_EQ(c.misses(), 4u);
    EXPECT_EQ(max_steps(c), 4444);
    EXPECT_EQ(c.hits(), 1u);
    // Removed: no such preset any more.
    fs::remove(dir_ / "p.yaml");
    EXPECT_EQ(max_steps(c), -1);
}

TEST_F(PresetCacheTest, ARefusedOverrideListIsRefusedAgainWithTheSameIssuesAndNotKept) {
    PresetCache c(dir_);
    EXPECT_EQ(max_steps(c), 111);
    const size_t held = c.bytes();
    std::string first, second;
    try {
        c.load("p", {"trainer.lr=not-a-number"});
        FAIL() << "accepted";
    } catch (const llmt::config::ConfigValidationError& e) {
        first = e.what();
        ASSERT_FALSE(e.issues().empty());
        EXPECT_EQ(e.issues().front().key, "trainer.lr");
    }
    try {
        c.load("p", {"trainer.lr=not-a-number"});
        FAIL() << "accepted";
    } catch (const llmt::config::ConfigValidationError& e) {
        second = e.what();
    }
    EXPECT_EQ(first, second);
    EXPECT_EQ(c.hits(), 0u);  // parsed again: a refusal is never kept
    EXPECT_EQ(c.bytes(), held);
    // A broken file is reported, and mending it is seen.
    edit_in_place("trainer: {max_steps: [\n");
    EXPECT_THROW(c.load("p", {}), llmt::config::ConfigValidationError);
    llmt::write_file_atomic(dir_ / "p.yaml", kPreset);
    EXPECT_EQ(max_steps(c), 111);
}

TEST_F(PresetCacheTest, DistinctOverrideListsAreKeptWithinTheByteBound) {
    PresetCache c(dir_);
    // 200 lists with a 200 KB value each: 40 MB of keys alone, more than kMaxBytes.
    const std::string big(200u << 10, 'v');
    for (int i = 0; i < 200; ++i) {
        ASSERT_TRUE(c.load("p", {"tracking.mlflow.run_name=" + big + std::to_string(i)}));
        ASSERT_LE(c.bytes(), PresetCache::kMaxBytes) << "after " << i + 1;
    }
    EXPECT_GT(c.bytes(), PresetCache::kMaxBytes / 2);  // it did keep what fits
    // The newest is still a hit; the first left long ago.
    const uint64_t hits = c.hits();
    c.load("p", {"tracking.mlflow.run_name=" + big + "199"});
    EXPECT_EQ(c.hits(), hits + 1);
    c.load("p", {"tracking.mlflow.run_name=" + big + "0"});
    EXPECT_EQ(c.hits(), hits + 1);
    // A list larger than kMaxBytes / 16 is not kept at all.
    const size_t before = c.bytes();
    const std::string huge(PresetCache::kMaxBytes / 16, 'h');
    ASSERT_TRUE(c.load("p", {"tracking.mlflow.run_name=" + huge}));
    EXPECT_LE(c.bytes(), before);
}

TEST_F(PresetCacheTest, ARefusedLongValueIsDescribedNotQuoted) {
    PresetCache c(dir_);
    const std::string value(100000, 'q');
    try {
        c.load("p", {"trainer.lr=" + value});
        FAIL() << "accepted";
    } catch (const llmt::config::ConfigValidationError& e) {
        const std::string what = e.what();
        EXPECT_LT(what.size(), 2000u) << what.substr(0, 300);
        EXPECT_EQ(what.find(std::string(100, 'q')), std::string::npos);
        EXPECT_NE(what.find("100000 bytes"), std::string::npos) << what;
        for (const auto& issue : e.issues()) {
            EXPECT_LT(issue.where.size() + issue.message.size(), 1000u);
        }
    }
}

}  // namespace
