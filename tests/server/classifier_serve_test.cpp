// Issue 21 through the control plane: the submission of the issue, word for word (the fashion_mnist_cnn
// preset, 5 epochs, micro-batch 128, 2 processes), ends succeeded, and its summary carries the test set's
// accuracy and confusion matrix (Debian's dataset-fashion-mnist, read where scripts/setup.sh installs it).
#include "server_fixture.h"

namespace {

namespace fs = std::filesystem;
using namespace llmt::testing;

TEST(ClassifierServe, FashionMnistSubmissionSucceedsWithTestAccuracy) {
    const fs::path root = fs::temp_directory_path() / ("llmt_cls_serve_" + std::to_string(::getpid()));
    ServeProcess server(root / "srv", {"--capacity", "cpus=2,gpus=0", "--allow-read", "/usr/share/datasets"});
    Api bob(server.port(), kSubmitterToken);
    const auto body = nlohmann::json::parse(R"({"name": "fmnist", "config": "fashion_mnist_cnn",
        "overrides": {"trainer.epochs": 5, "trainer.micro_batch_size": 128}, "nproc_per_node": 2})");
    auto r = bob.post("/v1/jobs", body);
    ASSERT_EQ(r.status, 201) << r.text;
    const int64_t id = r.body["id"];
    auto job = [&] { return bob.get("/v1/jobs/" + std::to_string(id)).body; };
    ASSERT_TRUE(wait_for([&] { return job().value("state", "") == "succeeded"; }, 1800)) << job().dump(2) << server.log();
    auto s = bob.get("/v1/jobs/" + std::to_string(id) + "/artifacts/summary.json");
    ASSERT_EQ(s.status, 200) << s.text;
    EXPECT_EQ(s.body["world_size"], 2);
    EXPECT_GE(s.body["test_accuracy"].get<double>(), 0.91) << s.body.dump(2);
    EXPECT_EQ(s.body["confusion_matrix"].size(), 10u);
    EXPECT_EQ(s.body["class_names"][9], "Ankle boot");
    fs::remove_all(root);
}

}  // namespace
