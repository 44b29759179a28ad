// Image classification through the control plane: a fashion_mnist_cnn job submitted to a real `llmtrain serve` (2
// processes, Debian's dataset-fashion-mnist where scripts/setup.sh installs it), waited for, and its
// job detail (GET /v1/jobs/{id}: `result`, filled from the run's summary.json by server/jobs/job_result.h)
// checked. Used by the slow test (the submission, word for word) and the quick one in make test.
#pragma once

#include "server_fixture.h"

namespace llmt::testing {

struct ClassifierJob {
    nlohmann::json detail;  // GET /v1/jobs/{id} once it ended
    nlohmann::json submitted;  // the 201 body (its estimate)
    double wall_s = 0;      // submit to succeeded
};

// Submits `overrides` on fashion_mnist_cnn with nproc_per_node 2 and waits up to `timeout_s` for it to
// succeed (a failure or timeout fails the calling test with the job and the server's log).
inline ClassifierJob run_fashion_mnist_job(const std::filesystem::path& root, const nlohmann::json& overrides,
                                           double timeout_s) {
    ServeProcess server(root / "srv", {"--capacity", "cpus=2,gpus=0", "--allow-read", "/usr/share/datasets"});
    Api bob(server.port(), kSubmitterToken);
    nlohmann::json body = {{"name", "fmnist"}, {"config", "fashion_mnist_cnn"}, {"overrides", overrides},
                           {"nproc_per_node", 2}};
    const auto t0 = std::chrono::steady_clock::now();
    auto r = bob.post("/v1/jobs", body);
    EXPECT_EQ(r.status, 201) << r.text;
    ClassifierJob out;
    out.submitted = r.body;
    if (r.status != 201) return out;
    const std::string path = "/v1/jobs/" + std::to_string(r.body["id"].get<int64_t>());
    std::string state;
    const bool ended = wait_for([&] {
        state = bob.get(path).body.value("state", "");
        return state == "succeeded" || state == "failed" || state == "cancelled";
    }, timeout_s);
    out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.detail = bob.get(path).body;
    EXPECT_TRUE(ended && state == "succeeded") << out.detail.dump(2) << "\n"
                                               << bob.get(path + "/logs?rank=0").text << server.log();
    if (!ended) {
        Api admin(server.port(), kAdminToken);
        cancel_jobs(admin, {"queued", "running", "retrying"});
    }
    return out;
}

// The evaluation in the job detail: a test accuracy in [bound, 1], the 10 x 10 confusion matrix whose
// counts add up to the 10,000 test images, and Fashion-MNIST's class names.
inline void expect_classifier_result(const nlohmann::json& detail, double bound) {
    const nlohmann::json& res = detail["result"];
    ASSERT_TRUE(res.is_object()) << detail.dump(2);
    ASSERT_TRUE(res["test_accuracy"].is_number()) << res.dump(2);
    EXPECT_GE(res["test_accuracy"].get<double>(), bound) << res.dump(2);
    EXPECT_LE(res["test_accuracy"].get<double>(), 1.0) << res.dump(2);
    EXPECT_EQ(res["world_size"], 2) << res.dump(2);
    ASSERT_EQ(res["confusion_matrix"].size(), 10u) << res.dump(2);
    int64_t total = 0;
    for (const auto& row : res["confusion_matrix"])
        for (const auto& n : row) total += n.get<int64_t>();
    EXPECT_EQ(total, 10000);
    EXPECT_EQ(res["class_names"][9], "Ankle boot");
    EXPECT_FALSE(res.contains("invalid")) << res.dump(2);
}

}  // namespace llmt::testing
