// The submission path of a real server whose queue admits nothing: a preset edited while the server
// runs is what the next submission gets (the preset cache sees the change); concurrent submissions
// under group commit are each answered 201 with a row of their own; a submission whose transaction
// fails is answered with an error, never 201, and leaves no row.
#include <sqlite3.h>

#include <atomic>
#include <set>

#include "server_fixture.h"

namespace {

namespace fs = std::filesystem;
using namespace llmt::testing;

const char* kPreset = R"(run: {name: edited, device: cpu}
model: {arch: gpt2, n_layer: 2, n_head: 2, d_model: 64, block_size: 32, vocab_size: 256}
trainer: {max_steps: 111, micro_batch_size: 2, eval_every_steps: 0}
data: {train_shards: shards/train_*.bin}
)";

class SubmitPathTest : public ::testing::Test {
protected:
    void SetUp() override {
        root_ = fs::temp_directory_path() / ("llmt_submit_path_" + std::to_string(::getpid()) + "_" +
                                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(root_);
        fs::create_directories(root_ / "presets");
        llmt::write_file_atomic(root_ / "presets" / "p.yaml", kPreset);
        server_ = std::make_unique<ServeProcess>(
            root_ / "srv", std::vector<std::string>{"--capacity", "cpus=0,gpus=0", "--presets-dir",
                                                    (root_ / "presets").string()});
    }
    void TearDown() override {
        server_.reset();
        fs::remove_all(root_);
    }
    static nlohmann::json body(const std::string& name) {
        return {{"name", name}, {"config", "p"}, {"labels", {{"test", "submit-path"}}}};
    }
    // The job's config as stored (what it would run with).
    std::string config_yaml(int64_t id) {
        Api admin(server_->port(), kAdminToken);
        return admin.get("/v1/jobs/" + std::to_string(id)).body.value("config_yaml", "");
    }
    size_t labelled_jobs() {
        Api admin(server_->port(), kAdminToken);
        return admin.get("/v1/jobs?label=test=submit-path&limit=500").body.at("jobs").size();
    }
    fs::path root_;
    std::unique_ptr<ServeProcess> server_;
};

TEST_F(SubmitPathTest, AnEditedPresetIsWhatTheNextSubmissionGets) {
    Api api(server_->port(), kSubmitterToken);
    const Http first = api.post("/v1/jobs", body("before"));
    ASSERT_EQ(first.status, 201) << first.text;
    EXPECT_NE(config_yaml(first.body["id"]).find("max_steps: 111"), std::string::npos);
    const Http again = api.post("/v1/jobs", body("cached"));
    ASSERT_EQ(again.status, 201) << again.text;
    // Rewritten in place (same inode, another size).
    std::string text = kPreset;
    text.replace(text.find("111"), 3, "4321");
    {
        std::ofstream out(root_ / "presets" / "p.yaml", std::ios::trunc);
        out << text;
    }
    const Http after = api.post("/v1/jobs", body("after"));
    ASSERT_EQ(after.status, 201) << after.text;
    const std::string yaml = config_yaml(after.body["id"]);
    EXPECT_NE(yaml.find("max_steps: 4321"), std::string::npos) << yaml;
    // A mistake in the edited preset is reported on the next submission, naming the file.
    {
        std::ofstream out(root_ / "presets" / "p.yaml", std::ios::trunc);
        out << "trainer: {max_steps: -5}\n";
    }
    const Http broken = api.post("/v1/jobs", body("broken"));
    EXPECT_EQ(broken.status, 400) << broken.text;
    EXPECT_NE(broken.text.find("p.yaml"), std::string::npos) << broken.text;
}

TEST_F(SubmitPathTest, ConcurrentSubmissionsAreEachAnsweredWithARowOfTheirOwn) {
    constexpr int kClients = 24, kEach = 5;
    std::mutex mu;
    std::set<int64_t> ids;
    std::atomic<int> not_created{0};
    std::vector<std::thread> ts;
    for (int c = 0; c < kClients; ++c)
        ts.emplace_back([&, c] {
            Api api(server_->port(), kSubmitterToken);
            for (int k = 0; k < kEach; ++k) {
                const Http r = api.post("/v1/jobs", body("c" + std::to_string(c) + "-" + std::to_string(k)));
                if (r.status != 201) {
                    ++not_created;
                    continue;
                }
                std::lock_guard lock(mu);
                ids.insert(r.body.at("id").get<int64_t>());
            }
        });
    for (auto& t : ts) t.join();
    EXPECT_EQ(not_created.load(), 0);
    EXPECT_EQ(ids.size(), static_cast<size_t>(kClients * kEach));
    EXPECT_EQ(labelled_jobs(), static_cast<size_t>(kClients * kEach));
    Api admin(server_->port(), kAdminToken);
    for (int64_t id : ids) EXPECT_EQ(admin.get("/v1/jobs/" + std::to_string(id)).status, 200) << id;
}

TEST_F(SubmitPathTest, ASubmissionWhoseTransactionFailsGetsAnErrorNotA201) {
    // A real failure in the store's transaction: SQLite refuses inserting jobs named boom-*.
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open((root_ / "srv" / "data" / "jobs.sqlite").c_str(), &h), SQLITE_OK);
    sqlite3_busy_timeout(h, 10000);
    ASSERT_EQ(sqlite3_exec(h,
                           "CREATE TRIGGER refuse_boom BEFORE INSERT ON jobs WHEN NEW.name LIKE 'boom%' "
                           "BEGIN SELECT RAISE(ABORT, 'injected failure'); END;",
                           nullptr, nullptr, nullptr),
              SQLITE_OK)
        << sqlite3_errmsg(h);
    sqlite3_close(h);
    Api api(server_->port(), kSubmitterToken);
    std::vector<std::thread> ts;
    std::atomic<int> boom_500{0}, fine_201{0}, other{0};
    for (int i = 0; i < 12; ++i)
        ts.emplace_back([&, i] {
            Api mine(server_->port(), kSubmitterToken);
            const bool boom = i % 2 == 0;
            const Http r = mine.post("/v1/jobs", body((boom ? "boom-" : "fine-") + std::to_string(i)));
            if (boom && r.status == 500 && r.body["error"]["code"] == "internal" &&
                r.text.find("injected failure") != std::string::npos)
                ++boom_500;
            else if (!boom && r.status == 201)
                ++fine_201;
            else
                ++other;
        });
    for (auto& t : ts) t.join();
    EXPECT_EQ(boom_500.load(), 6);
    EXPECT_EQ(fine_201.load(), 6);
    EXPECT_EQ(other.load(), 0);
    EXPECT_EQ(labelled_jobs(), 6u);
}

}  // namespace
