// The hub cache layout (core/hub_cache.h) on folders laid out as huggingface_hub does: refs/<name> ->
// snapshots/<hash>/ whose files link into blobs/; revisions by branch, tag and hash, the revisions named
// when one is missing, snapshot paths given directly, and links that leave the folder refused.
#include "core/hub_cache.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "core/error.h"

namespace {

namespace fs = std::filesystem;
using llmt::InputError;

const std::string kMain = "1111111111111111111111111111111111111111";
const std::string kV1 = "2222222222222222222222222222222222222222";

class HubCache : public ::testing::Test {
protected:
    void SetUp() override {
        root_ = fs::temp_directory_path() / ("llmt_hub_" + std::to_string(::getpid()) + "_" +
                                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(root_);
        repo_ = root_ / "models--org--m";
        for (const auto& [ref, hash] : {std::pair{std::string("main"), kMain}, std::pair{std::string("v1.0"), kV1}}) {
            fs::create_directories(repo_ / "refs");
            std::ofstream(repo_ / "refs" / ref) << hash;  // huggingface_hub writes the hash without a newline
            fs::create_directories(repo_ / "snapshots" / hash / "sub");
            fs::create_directories(repo_ / "blobs");
            std::ofstream(repo_ / "blobs" / ("b" + hash.substr(0, 1))) << ref;
            fs::create_symlink("../../blobs/b" + hash.substr(0, 1), repo_ / "snapshots" / hash / "config.json");
        }
        fs::create_directories(root_ / "outside");
        std::ofstream(root_ / "outside/secret") << "secret";
    }
    void TearDown() override { fs::remove_all(root_); }

    static std::string message_of(const std::function<void()>& f) {
        try {
            f();
        } catch (const InputError& e) {
            return e.what();
        }
        return "";
    }
    fs::path root_, repo_;
};

TEST_F(HubCache, RevisionsResolveByBranchTagAndHash) {
    EXPECT_EQ(llmt::resolve_hub_path(repo_), repo_ / "snapshots" / kMain);
    EXPECT_EQ(llmt::resolve_hub_path(repo_, "v1.0"), repo_ / "snapshots" / kV1);
    EXPECT_EQ(llmt::resolve_hub_path(repo_, kV1), repo_ / "snapshots" / kV1);
    bool in_cache = true;
    EXPECT_EQ(llmt::resolve_hub_path(root_ / "outside", "main", &in_cache), root_ / "outside");
    EXPECT_FALSE(in_cache);
    llmt::resolve_hub_path(repo_, "main", &in_cache);
    EXPECT_TRUE(in_cache);
}

TEST_F(HubCache, AMissingRevisionNamesTheRevisionsFound) {
    const std::string m = message_of([&] { llmt::resolve_hub_path(repo_, "v2"); });
    EXPECT_NE(m.find("has no revision 'v2'"), std::string::npos) << m;
    EXPECT_NE(m.find("refs: main, v1.0; snapshots: " + kMain + ", " + kV1), std::string::npos) << m;
}

TEST_F(HubCache, ASnapshotGivenDirectlyIsItselfAndMustMatchARevisionGiven) {
    const fs::path snap = repo_ / "snapshots" / kV1;
    EXPECT_EQ(llmt::hub_cache_repo_of(snap), repo_);
    EXPECT_EQ(llmt::hub_cache_repo_of(snap / "config.json"), repo_);
    EXPECT_EQ(llmt::hub_cache_repo_of(repo_ / "snapshots"), std::nullopt);
    EXPECT_EQ(llmt::hub_cache_repo_of(root_ / "outside"), std::nullopt);
    EXPECT_EQ(llmt::resolve_hub_path(snap), snap);
    EXPECT_EQ(llmt::resolve_hub_path(snap, "v1.0"), snap);
    EXPECT_EQ(llmt::resolve_hub_path(snap / "config.json", kV1), snap / "config.json");
    const std::string m = message_of([&] { llmt::resolve_hub_path(snap, "main"); });
    EXPECT_EQ(m, "") << "main is the default: a snapshot named directly is taken as named";
    fs::create_directories(repo_ / "refs" / "pr");
    std::ofstream(repo_ / "refs/pr/1") << kMain;
    const std::string other = message_of([&] { llmt::resolve_hub_path(snap, "pr/1"); });
    EXPECT_NE(other.find("is in another snapshot than revision 'pr/1'"), std::string::npos) << other;
}

TEST_F(HubCache, LinksOutOfTheFolderAreRefusedAndInsideAreFollowed) {
    const fs::path snap = repo_ / "snapshots" / kMain;
    // A link to a directory inside the folder is walked; one from there to outside is found too.
    fs::create_directories(repo_ / "blobs/dir");
    fs::create_symlink("../../../blobs/dir", snap / "sub" / "d");
    EXPECT_NO_THROW(llmt::resolve_hub_path(repo_));
    fs::create_symlink(root_ / "outside/secret", repo_ / "blobs/dir/leak");
    std::string m = message_of([&] { llmt::resolve_hub_path(repo_); });
    EXPECT_NE(m.find("outside the hub cache folder '" + repo_.string() + "'"), std::string::npos) << m;
    EXPECT_NE(m.find("leak"), std::string::npos) << m;
    fs::remove(repo_ / "blobs/dir/leak");
    // Relative links that climb out, and a file in the snapshot named directly.
    fs::create_symlink("../../../outside/secret", snap / "tokenizer.json");
    m = message_of([&] { llmt::resolve_hub_path(snap / "tokenizer.json"); });
    EXPECT_NE(m.find("tokenizer.json' links to '" + (root_ / "outside/secret").string() + "'"), std::string::npos)
        << m;
    EXPECT_NE(message_of([&] { llmt::resolve_hub_path(repo_); }), "");
    // The other revision's snapshot is not affected.
    EXPECT_EQ(llmt::resolve_hub_path(repo_, "v1.0"), repo_ / "snapshots" / kV1);
    // A link cycle inside the folder ends.
    fs::remove(snap / "tokenizer.json");
    fs::create_symlink("..", snap / "sub" / "up");
    EXPECT_NO_THROW(llmt::resolve_hub_path(repo_));
}

TEST_F(HubCache, ARevisionWithNothingToApplyToIsRefused) {
    EXPECT_NO_THROW(llmt::check_revision_used("main", false, "--revision", "--model"));
    EXPECT_NO_THROW(llmt::check_revision_used("v1.0", true, "--revision", "--model"));
    const std::string m =
        message_of([&] { llmt::check_revision_used("v1.0", false, "--revision", "--model or --tokenizer"); });
    EXPECT_NE(m.find("--revision 'v1.0' selects a snapshot of a hub cache folder"), std::string::npos) << m;
    EXPECT_NE(m.find("--model or --tokenizer names no such folder"), std::string::npos) << m;
}

}  // namespace
