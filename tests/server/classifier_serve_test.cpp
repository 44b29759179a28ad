// The classifier acceptance run through `llmtrain serve`: fashion_mnist_cnn, 5 epochs of
// micro-batch 128 on 2 processes, ends succeeded with the test accuracy in the job detail. Bound 0.90: the
// 91% target is for 5 epochs of the preset in one process (measured 91.71%, docs/benchmarks.md); on 2
// ranks the global batch is 256, so the same 5 epochs are half the optimizer steps (1,075), and this run
// measured 0.9081 (deterministic: fixed seed, fixed reduction order); chance is 10%. Label slow
// (make test-slow): minutes of training on 2 cores. classifier_serve_quick_test is the make-test one.
#include "classifier_serve.h"

namespace {

namespace fs = std::filesystem;
using namespace llmt::testing;

TEST(ClassifierServe, FashionMnistSubmissionSucceedsWithTestAccuracy) {
    const fs::path root = fs::temp_directory_path() / ("llmt_cls_serve_" + std::to_string(::getpid()));
    ClassifierJob job = run_fashion_mnist_job(root, {{"trainer.epochs", 5}, {"trainer.micro_batch_size", 128}}, 1800);
    expect_classifier_result(job.detail, 0.90);
    // The estimate at submit came from the measured images/s rows (configs/throughput.jsonl).
    EXPECT_EQ(job.submitted["estimate"]["source"], "measured") << job.submitted.dump(2);
    EXPECT_EQ(job.submitted["estimate"]["epochs"], 5) << job.submitted.dump(2);
    const nlohmann::json& est = job.submitted["estimate"];
    std::printf("fashion_mnist_cnn, 5 epochs, 2 processes through serve: test accuracy %s, %.0f s submit to "
                "succeeded (estimated %s s)\n",
                job.detail["result"]["test_accuracy"].dump().c_str(), job.wall_s, est["duration_s"].dump().c_str());
    fs::remove_all(root);
}

}  // namespace
