// The make-test companion of classifier_serve_test: the same preset, server and 2 processes, cut to
// QUICK_STEPS optimizer steps (trainer.epochs 0 gives trainer.max_steps back the run's length), so the
// whole path — submit, 2-rank training, the automatic test-set evaluation, summary.json, the job
// detail's `result` — runs in about 25 s on 2 busy cores. The accuracy bound is far above chance (0.10
// for 10 classes) and below what these steps reach (see kQuickBound).
#include "classifier_serve.h"

namespace {

namespace fs = std::filesystem;
using namespace llmt::testing;

constexpr int kQuickSteps = 60;  // x 2 ranks x 128 images = 15,360 images, a quarter of an epoch
// Measured: 0.8009 after these steps (seed 1337; 2026-11-27 on the 2-core Zen 4). The bound leaves 0.1 for
// other summation orders (threads, kernels) and is 7x chance: guessing among 10 classes scores 0.10
// (+-0.003 over the 10,000 test images), and an untrained or broken model (a wrong gradient, labels
// misread) stays near it.
constexpr double kQuickBound = 0.7;

TEST(ClassifierServeQuick, ShortFashionMnistJobHasTestAccuracyInTheJobDetail) {
    const fs::path root = fs::temp_directory_path() / ("llmt_cls_serve_quick_" + std::to_string(::getpid()));
    ClassifierJob job = run_fashion_mnist_job(root,
                                              {{"trainer.epochs", 0},
                                               {"trainer.max_steps", kQuickSteps},
                                               {"trainer.warmup_steps", 5},
                                               {"trainer.micro_batch_size", 128}},
                                              600);
    expect_classifier_result(job.detail, kQuickBound);
    EXPECT_EQ(job.detail["latest_metrics"]["step"], kQuickSteps) << job.detail.dump(2);
    std::printf("%d steps through serve: test accuracy %s, %.0f s\n", kQuickSteps,
                job.detail["result"]["test_accuracy"].dump().c_str(), job.wall_s);
    fs::remove_all(root);
}

}  // namespace
