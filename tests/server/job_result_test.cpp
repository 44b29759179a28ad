// The `result` of a job from its summary.json (server/jobs/job_result.h): a classifier's summary (as
// `train` writes it for model.arch mlp|cnn) gives its scalars, confusion matrix, per-class accuracy and
// class names; fields of the wrong shape are named in `invalid`, not copied; the cache parses a summary
// once per file version and sees a replaced or removed file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "core/error.h"
#include "core/fs.h"
#include "server/jobs/job_result.h"

namespace {

namespace fs = std::filesystem;
using llmt::server::JobResultCache;
using llmt::server::compact_result;
using llmt::server::result_from_summary;

// A 3-class classifier's summary, of the shape `train` writes for one.
const char* kClassifierSummary = R"({
  "run_id": "job-7", "final_train_loss": 0.25, "final_val_loss": 0.31, "best_val_loss": 0.30,
  "steps": 120, "tokens": 0, "wall_s": 12.5, "tokens_per_sec": 0.0, "images_per_sec": 6400.5,
  "interrupted": false, "device": "cpu", "world_size": 1,
  "test_accuracy": 0.8, "test_loss": 0.52,
  "per_class_accuracy": [0.9, 0.7, null],
  "confusion_matrix": [[9, 1, 0], [2, 7, 1], [0, 0, 0]],
  "class_names": ["T-shirt/top", "Trouser", "Pullover"],
  "extra": {"nested": true}
})";

class JobResultTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("llmt_job_result_" + std::to_string(::getpid()) + "_" +
                                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }
    fs::path dir_;
};

TEST_F(JobResultTest, ClassifierSummaryGivesScalarsMatrixPerClassAccuracyAndNames) {
    auto r = result_from_summary(kClassifierSummary, "summary.json");
    EXPECT_EQ(r["test_accuracy"], 0.8);
    EXPECT_EQ(r["test_loss"], 0.52);
    EXPECT_EQ(r["best_val_loss"], 0.30);
    EXPECT_EQ(r["images_per_sec"], 6400.5);  // any top-level scalar, not a fixed list
    EXPECT_EQ(r["device"], "cpu");
    EXPECT_EQ(r["interrupted"], false);
    EXPECT_EQ(r["confusion_matrix"], nlohmann::json::parse("[[9,1,0],[2,7,1],[0,0,0]]"));
    EXPECT_EQ(r["per_class_accuracy"], nlohmann::json::parse("[0.9,0.7,null]"));
    EXPECT_EQ(r["class_names"][1], "Trouser");
    EXPECT_FALSE(r.contains("extra")) << "objects other than the classifier's fields are not copied";
    EXPECT_FALSE(r.contains("invalid")) << r.dump();

    auto c = compact_result(r);
    EXPECT_EQ(c, nlohmann::json::parse(
                     R"({"final_train_loss":0.25,"final_val_loss":0.31,"best_val_loss":0.30,"test_accuracy":0.8})"));
}

TEST_F(JobResultTest, LanguageModelSummaryKeepsNullLossesAndHasNoClassifierFields) {
    auto r = result_from_summary(
        R"({"run_id":"job-1","final_train_loss":3.5,"final_val_loss":null,"best_val_loss":null,"steps":12})", "s");
    EXPECT_TRUE(r["final_val_loss"].is_null());
    EXPECT_FALSE(r.contains("confusion_matrix"));
    EXPECT_EQ(compact_result(r),
              nlohmann::json::parse(R"({"final_train_loss":3.5,"final_val_loss":null,"best_val_loss":null})"));
}

TEST_F(JobResultTest, MisshapenClassifierFieldsAreNamedNotCopied) {
    auto r = result_from_summary(
        R"({"confusion_matrix": [[1, 2], [3]], "per_class_accuracy": [0.5, 1.5], "class_names": ["a", 3]})", "s");
    EXPECT_FALSE(r.contains("confusion_matrix"));
    EXPECT_FALSE(r.contains("per_class_accuracy"));
    EXPECT_FALSE(r.contains("class_names"));
    ASSERT_EQ(r["invalid"].size(), 3u) << r.dump();
    EXPECT_NE(r["invalid"][0].get<std::string>().find("row 1 has 1 entries, expected 2"), std::string::npos);

    auto neg = result_from_summary(R"({"confusion_matrix": [[1, -2], [3, 4]]})", "s");
    EXPECT_NE(neg["invalid"][0].get<std::string>().find("entry [0][1]"), std::string::npos) << neg.dump();

    // Sizes that disagree: the matrix has 2 classes, the names 3.
    auto mismatch =
        result_from_summary(R"({"confusion_matrix": [[1, 0], [0, 1]], "class_names": ["a","b","c"]})", "s");
    EXPECT_TRUE(mismatch.contains("confusion_matrix"));
    EXPECT_FALSE(mismatch.contains("class_names"));
    EXPECT_NE(mismatch["invalid"][0].get<std::string>().find("class_names: 3 classes"), std::string::npos)
        << mismatch.dump();

    EXPECT_THROW(result_from_summary("[1, 2]", "s"), llmt::FormatError);
    EXPECT_THROW(result_from_summary("{\"a\": ", "s"), llmt::FormatError);
}

TEST_F(JobResultTest, CacheParsesOncePerFileVersionAndSeesReplacementAndRemoval) {
    JobResultCache cache;
    EXPECT_TRUE(cache.full(dir_).is_null()) << "no summary.json yet";
    EXPECT_TRUE(cache.compact(dir_).is_null());

    llmt::write_file_atomic(dir_ / "summary.json", kClassifierSummary);
    EXPECT_EQ(cache.compact(dir_)["test_accuracy"], 0.8);
    for (int i = 0; i < 100; ++i) cache.compact(dir_);
    EXPECT_EQ(cache.full(dir_)["confusion_matrix"][1][0], 2);
    EXPECT_EQ(cache.parses(), 1u) << "the same file version is parsed once";

    // The trainer replaces summary.json atomically (a new inode) after a resumed attempt.
    llmt::write_file_atomic(dir_ / "summary.json", R"({"test_accuracy": 0.9, "best_val_loss": 0.2})");
    EXPECT_EQ(cache.compact(dir_)["test_accuracy"], 0.9);
    EXPECT_EQ(cache.parses(), 2u);

    llmt::write_file_atomic(dir_ / "summary.json", "not json");
    auto bad = cache.full(dir_);
    ASSERT_TRUE(bad.contains("error")) << bad.dump();
    EXPECT_NE(bad["error"].get<std::string>().find("summary.json"), std::string::npos) << bad.dump();
    EXPECT_TRUE(cache.compact(dir_).contains("error"));

    fs::remove(dir_ / "summary.json");
    EXPECT_TRUE(cache.full(dir_).is_null());
}

}  // namespace
