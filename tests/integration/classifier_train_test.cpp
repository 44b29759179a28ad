// Image classification through the real binary on a small synthetic IDX set whose classes are
// learnable (class k: a bright square in corner k): training ends with the test set's accuracy, per-class
// accuracy and confusion matrix in summary.json; 2 ranks on the same global batch match 1 process step by
// step; a run stopped and resumed is bit-identical to one that was not; `eval` reports the test accuracy;
// a truncated IDX file is exit 2 naming the offset.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/fs.h"
#include "core/rng.h"
#include "core/safetensors.h"
#include "support/subprocess.h"
#include "support/train_fixture.h"

namespace {

namespace fs = std::filesystem;
using llmt::testing::llmtrain_bin;
using llmt::testing::run_process;

constexpr int kSize = 8, kClasses = 4;

std::string idx_header(std::vector<uint32_t> dims) {
    std::string s = {0, 0, 8, static_cast<char>(dims.size())};
    for (uint32_t d : dims)
        for (int k = 3; k >= 0; --k) s.push_back(static_cast<char>((d >> (8 * k)) & 0xff));
    return s;
}

// n images: noise, plus a bright 3x3 square in the corner of the label.
void write_set(const fs::path& images, const fs::path& labels, int n, uint64_t seed) {
    const llmt::CounterRng rng(seed, 0);
    std::string im = idx_header({static_cast<uint32_t>(n), kSize, kSize}), lb = idx_header({static_cast<uint32_t>(n)});
    for (int i = 0; i < n; ++i) {
        const int label = static_cast<int>(rng.bits(static_cast<uint64_t>(i)) % kClasses);
        lb.push_back(static_cast<char>(label));
        const int oy = label / 2 ? kSize - 3 : 0, ox = label % 2 ? kSize - 3 : 0;
        for (int y = 0; y < kSize; ++y)
            for (int x = 0; x < kSize; ++x) {
                const bool sq = y >= oy && y < oy + 3 && x >= ox && x < ox + 3;
                const int noise = static_cast<int>(rng.bits(100000 + static_cast<uint64_t>(i * 64 + y * 8 + x)) % 90);
                im.push_back(static_cast<char>(sq ? 160 + noise : noise));
            }
    }
    llmt::write_file_atomic(images, im);
    llmt::write_file_atomic(labels, lb);
}

class ClassifierTrain : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        root_ = fs::temp_directory_path() / ("llmt_cls_" + std::to_string(::getpid()));
        fs::create_directories(root_);
        write_set(root_ / "train-images", root_ / "train-labels", 200, 1);
        write_set(root_ / "test-images", root_ / "test-labels", 60, 2);
        std::ofstream(root_ / "cnn.yaml")
            << "run: {name: c, seed: 5, device: cpu, threads: 1, deterministic: true}\n"
            << "model: {arch: cnn, image_size: 8, num_classes: 4, conv_channels: [8, 8], hidden_sizes: [16]}\n"
            << "trainer: {epochs: 2, micro_batch_size: 8, lr: 1.0e-2, min_lr: 1.0e-3, warmup_steps: 5,\n"
            << "          log_every_steps: 1, eval_every_steps: 10, save_every_steps: 20, keep_last: 5}\n"
            << "dist: {timeout_sec: 60, bucket_mb: 0.001}\n"
            << "data: {source: idx, val_fraction: 0.1, train_images: " << (root_ / "train-images").string()
            << ", train_labels: " << (root_ / "train-labels").string()
            << ", test_images: " << (root_ / "test-images").string()
            << ", test_labels: " << (root_ / "test-labels").string() << "}\n";
    }
    static void TearDownTestSuite() { fs::remove_all(root_); }

    static std::vector<std::string> train(const std::string& run_id, std::vector<std::string> extra = {}) {
        return llmt::testing::train_command(root_ / "cnn.yaml", root_ / "runs", run_id, std::move(extra));
    }
    static std::vector<std::string> bin(std::vector<std::string> a) { return llmt::testing::with_bin(std::move(a)); }
    static std::vector<double> series(const std::string& run_id, const char* key) {
        return llmt::testing::metric_series(root_ / "runs" / run_id / "metrics.jsonl", key);
    }
    static nlohmann::json summary(const std::string& run_id) {
        return nlohmann::json::parse(llmt::read_file(root_ / "runs" / run_id / "summary.json"));
    }
    static fs::path root_;
};
fs::path ClassifierTrain::root_;

// 180 training images in batches of 8: 23 steps per epoch (the last of 4 rows), 46 for 2 epochs.
TEST_F(ClassifierTrain, TrainsAndEvaluatesTheTestSet) {
    auto r = run_process(bin(train("one", {"--set", "tracking.mlflow.uri=" + (root_ / "mlruns").string()})), "", 600);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto s = summary("one");
    EXPECT_EQ(s["steps"], 46);
    EXPECT_GE(s["test_accuracy"].get<double>(), 0.9) << s.dump();
    EXPECT_EQ(s["test_images"], 60);
    ASSERT_EQ(s["confusion_matrix"].size(), 4u);
    int64_t total = 0;
    for (const auto& row : s["confusion_matrix"]) {
        ASSERT_EQ(row.size(), 4u);
        for (const auto& c : row) total += c.get<int64_t>();
    }
    EXPECT_EQ(total, 60);
    EXPECT_EQ(s["per_class_accuracy"].size(), 4u);
    EXPECT_EQ(s["class_names"], nlohmann::json({"0", "1", "2", "3"}));
    EXPECT_NE(r.err.find("confusion matrix"), std::string::npos) << r.err;
    EXPECT_FALSE(series("one", "val_accuracy").empty());
    // Counted in images, not pixels: no "tokens" anywhere in a classifier's metrics or summary.
    EXPECT_TRUE(series("one", "tokens_per_sec").empty());
    EXPECT_TRUE(series("one", "tokens").empty());
    EXPECT_FALSE(series("one", "images_per_sec").empty());
    EXPECT_FALSE(s.contains("tokens")) << s.dump();
    EXPECT_FALSE(s.contains("tokens_per_sec")) << s.dump();
    EXPECT_FALSE(s.contains("tokens_per_sec_per_rank")) << s.dump();
    EXPECT_GT(s["images_per_sec"].get<double>(), 0) << s.dump();
    EXPECT_DOUBLE_EQ(s["images_per_sec_per_rank"].get<double>(), s["images_per_sec"].get<double>());  // one rank
    // The best validation accuracy is the one checkpoints/best holds, in the summary and state.json.
    EXPECT_EQ(s["best_val_accuracy"], series("one", "best_val_accuracy").back());
    std::string best = llmt::read_file(root_ / "runs/one/checkpoints/best");
    while (!best.empty() && std::isspace(static_cast<unsigned char>(best.back()))) best.pop_back();
    const auto state = nlohmann::json::parse(llmt::read_file(root_ / "runs/one/checkpoints" / best / "state.json"));
    EXPECT_EQ(state["best_val_accuracy"], s["best_val_accuracy"]) << best;
    // 2 epochs of 180 images in batches of 8 (each epoch's last batch is 4 short; the padding rows may count).
    EXPECT_GE(s["images"].get<int64_t>(), 360);
    EXPECT_LE(s["images"].get<int64_t>(), 368);
    // The final test metrics reach metrics.jsonl and MLflow like every other metric.
    ASSERT_EQ(series("one", "test_accuracy").size(), 1u);
    EXPECT_DOUBLE_EQ(series("one", "test_accuracy")[0], s["test_accuracy"].get<double>());
    bool in_mlflow = false;
    for (const auto& e : fs::recursive_directory_iterator(root_ / "mlruns"))
        if (e.path().filename() == "test_accuracy" && e.path().parent_path().filename() == "metrics") in_mlflow = true;
    EXPECT_TRUE(in_mlflow);
    // The best checkpoint by validation accuracy is kept.
    EXPECT_TRUE(fs::exists(root_ / "runs/one/checkpoints/best"));

    auto e = run_process(bin({"eval", "--config", (root_ / "cnn.yaml").string(), "--checkpoint",
                              (root_ / "runs/one").string(), "--json"}),
                         "", 300);
    ASSERT_EQ(e.exit_code, 0) << e.err;
    const auto ej = nlohmann::json::parse(e.out);
    EXPECT_DOUBLE_EQ(ej["test_accuracy"].get<double>(), s["test_accuracy"].get<double>());
}

// predict: the test file's first image as IDX and as a PGM get the same label and probability.
TEST_F(ClassifierTrain, PredictReadsIdxAndPgm) {
    if (!fs::exists(root_ / "runs/one/summary.json")) {
        ASSERT_EQ(run_process(bin(train("one")), "", 600).exit_code, 0);
    }
    const std::string idx = llmt::read_file(root_ / "test-images");
    llmt::write_file_atomic(root_ / "img0.pgm", "P5\n# test image 0\n8 8\n255\n" + idx.substr(16, 64));
    auto a = run_process(bin({"predict", "--checkpoint", (root_ / "runs/one").string(), "--images",
                              (root_ / "test-images").string(), "--json"}), "", 120);
    auto b = run_process(bin({"predict", "--checkpoint", (root_ / "runs/one").string(), "--images",
                              (root_ / "img0.pgm").string(), "--json"}), "", 120);
    ASSERT_EQ(a.exit_code, 0) << a.err;
    ASSERT_EQ(b.exit_code, 0) << b.err;
    const auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
    ASSERT_EQ(ja.size(), 60u);
    ASSERT_EQ(jb.size(), 1u);
    EXPECT_EQ(ja[0]["label"], jb[0]["label"]);
    EXPECT_EQ(ja[0]["probability"], jb[0]["probability"]);
    EXPECT_EQ(ja[0]["label"].get<int>(), static_cast<unsigned char>(llmt::read_file(root_ / "test-labels")[8]));
    auto bad = run_process(bin({"predict", "--checkpoint", (root_ / "runs/one").string(), "--images",
                                (root_ / "cnn.yaml").string()}), "", 120);
    EXPECT_EQ(bad.exit_code, 2) << bad.err;
}

// predict over several inputs: a PGM, a directory of PGMs and the IDX file after one --images, in that
// order, each image named by its file; a directory without images is exit 2 naming it.
TEST_F(ClassifierTrain, PredictTakesSeveralFilesAndDirectories) {
    if (!fs::exists(root_ / "runs/one/summary.json")) {
        ASSERT_EQ(run_process(bin(train("one")), "", 600).exit_code, 0);
    }
    const std::string idx = llmt::read_file(root_ / "test-images");
    fs::create_directories(root_ / "pgms");
    for (int i = 0; i < 3; ++i)
        llmt::write_file_atomic(root_ / "pgms" / ("img" + std::to_string(i) + ".pgm"),
                                "P5\n8 8\n255\n" + idx.substr(16 + 64 * static_cast<size_t>(i), 64));
    llmt::write_file_atomic(root_ / "pgms/notes.txt", "not an image");
    auto r = run_process(bin({"predict", "--checkpoint", (root_ / "runs/one").string(), "--images",
                              (root_ / "pgms/img2.pgm").string(), (root_ / "pgms").string(),
                              (root_ / "test-images").string(), "--json"}),
                         "", 120);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j.size(), 1u + 3u + 60u);
    EXPECT_EQ(j[0]["file"], (root_ / "pgms/img2.pgm").string());
    EXPECT_EQ(j[1]["file"], (root_ / "pgms/img0.pgm").string());
    EXPECT_EQ(j[4]["file"], (root_ / "test-images").string());
    EXPECT_EQ(j[4]["index"], 0);
    EXPECT_EQ(j[63]["image"], 63);
    // The same image through a PGM and through the IDX file: the same answer.
    EXPECT_EQ(j[1]["label"], j[4]["label"]);
    EXPECT_EQ(j[1]["probability"], j[4]["probability"]);
    fs::create_directories(root_ / "empty_dir");
    auto none = run_process(bin({"predict", "--checkpoint", (root_ / "runs/one").string(), "--images",
                                 (root_ / "empty_dir").string()}),
                            "", 120);
    EXPECT_EQ(none.exit_code, 2);
    EXPECT_NE(none.err.find((root_ / "empty_dir").string()), std::string::npos) << none.err;
}

// trainer.max_steps written with trainer.epochs: max_steps wins (one rule for train and its dry run), and
// the log says the length that runs and that both were written.
TEST_F(ClassifierTrain, WrittenMaxStepsWinsOverEpochs) {
    auto dry = run_process(bin(train("dry", {"--set", "trainer.max_steps=7", "--dry-run"})), "", 300);
    ASSERT_EQ(dry.exit_code, 0) << dry.err;
    EXPECT_NE(dry.err.find("trainer: 7 steps"), std::string::npos) << dry.err;
    auto r = run_process(bin(train("seven", {"--set", "trainer.max_steps=7"})), "", 600);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(summary("seven")["steps"], 7);
    EXPECT_NE(r.err.find("trainer: 7 steps"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("trainer.max_steps wins"), std::string::npos) << r.err;
    // Epochs alone still decide (46 steps, as above), and the log says so.
    auto e = run_process(bin(train("epochs_dry", {"--dry-run"})), "", 300);
    ASSERT_EQ(e.exit_code, 0) << e.err;
    EXPECT_NE(e.err.find("trainer: 46 steps (2 epochs)"), std::string::npos) << e.err;
}

// fp32: the ranks add their halves of each gradient in another order and the average adds a rounding,
// so weights drift by ulps per step; 1e-5 relative on each step's loss is ~100x that drift.
TEST_F(ClassifierTrain, TwoRanksMatchOneProcessStepByStep) {
    if (!fs::exists(root_ / "runs/one/summary.json")) {
        ASSERT_EQ(run_process(bin(train("one")), "", 600).exit_code, 0);
    }
    auto r = run_process({llmtrain_bin(), "launch", "--standalone", "--nproc-per-node", "2", "--", "train", "--config",
                          (root_ / "cnn.yaml").string(), "--set", "output.root_dir=" + (root_ / "runs").string(),
                          "--set", "output.run_id=two", "--set", "trainer.micro_batch_size=4"},
                         "", 600);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const auto a = series("one", "loss"), b = series("two", "loss");
    ASSERT_EQ(a.size(), 46u);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5 * std::abs(a[i])) << "step " << i + 1;
    EXPECT_NEAR(summary("one")["test_loss"].get<double>(), summary("two")["test_loss"].get<double>(), 1e-4);
    // Throughput in images, the job's and one rank's (half of it: both ranks ran every step).
    const auto two = summary("two");
    EXPECT_NEAR(two["images_per_sec_per_rank"].get<double>(), two["images_per_sec"].get<double>() / 2,
                1e-9 * two["images_per_sec"].get<double>());
    EXPECT_FALSE(two.contains("tokens_per_sec_per_rank")) << two.dump();
}

// Stopped at step 13 (mid-epoch) and resumed: the same losses and the same final weights, bit for bit.
TEST_F(ClassifierTrain, ResumeIsBitIdentical) {
    const std::vector<std::string> aug = {"--set", "data.augment.crop_padding=1", "--set", "data.augment.hflip=true",
                                          "--set", "model.dropout=0.2"};
    auto full = run_process(bin(train("full", aug)), "", 600);
    ASSERT_EQ(full.exit_code, 0) << full.err;
    auto extra = aug;
    extra.insert(extra.end(), {"--stop-at-step", "13"});
    auto part = run_process(bin(train("split", extra)), "", 600);
    ASSERT_EQ(part.exit_code, 0) << part.err;
    extra = aug;
    extra.insert(extra.end(), {"--resume", "split"});
    auto rest = run_process(bin(train("split", extra)), "", 600);
    ASSERT_EQ(rest.exit_code, 0) << rest.err;
    const auto a = series("full", "loss"), b = series("split", "loss");
    ASSERT_EQ(a.size(), 46u);
    ASSERT_EQ(b.size(), 46u);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << "step " << i + 1;
    EXPECT_EQ(llmt::read_file(root_ / "runs/full/checkpoints/step_46/model.safetensors"),
              llmt::read_file(root_ / "runs/split/checkpoints/step_46/model.safetensors"));
    EXPECT_EQ(summary("full")["test_accuracy"], summary("split")["test_accuracy"]);
}

// trainer.optimizer sgd (Nesterov momentum, L2 decay): the model learns the squares, a run stopped at step
// 13 and resumed is bit-identical to one that was not, and the SGD checkpoint refuses to continue as AdamW.
TEST_F(ClassifierTrain, SgdLearnsResumesBitIdenticalAndRefusesAdamW) {
    const std::vector<std::string> sgd = {"--set", "trainer.optimizer=sgd",  "--set", "trainer.nesterov=true",
                                          "--set", "trainer.lr=0.1",         "--set", "trainer.weight_decay=0.001",
                                          "--set", "model.dropout=0.2",      "--set", "data.augment.crop_padding=1"};
    auto full = run_process(bin(train("sgd_full", sgd)), "", 600);
    ASSERT_EQ(full.exit_code, 0) << full.err;
    EXPECT_GE(summary("sgd_full")["test_accuracy"].get<double>(), 0.9) << summary("sgd_full").dump();
    // The momentum buffer is in the checkpoint, one per parameter in the parameter's shape.
    const auto opt = llmt::SafetensorsFile::open(root_ / "runs/sgd_full/checkpoints/step_46/optimizer.safetensors");
    EXPECT_EQ(opt.metadata().at("format"), "llmtrain.sgd.v1");
    EXPECT_EQ(opt.info("out.weight.momentum_buffer").shape, (llmt::Shape{4, 16}));
    EXPECT_EQ(opt.info("out.bias.momentum_buffer").shape, (llmt::Shape{4}));

    auto extra = sgd;
    extra.insert(extra.end(), {"--stop-at-step", "13"});
    auto part = run_process(bin(train("sgd_split", extra)), "", 600);
    ASSERT_EQ(part.exit_code, 0) << part.err;
    // Continuing the SGD checkpoint with AdamW is refused, naming both optimizers.
    auto adamw = run_process(
        bin(train("sgd_split", {"--set", "model.dropout=0.2", "--set", "data.augment.crop_padding=1", "--set",
                                "trainer.lr=0.1", "--set", "trainer.weight_decay=0.001", "--resume", "sgd_split"})),
        "", 600);
    EXPECT_EQ(adamw.exit_code, 2) << adamw.err;
    EXPECT_NE(adamw.err.find("written by trainer.optimizer sgd and this run's trainer.optimizer is adamw"),
              std::string::npos) << adamw.err;
    extra = sgd;
    extra.insert(extra.end(), {"--resume", "sgd_split"});
    auto rest = run_process(bin(train("sgd_split", extra)), "", 600);
    ASSERT_EQ(rest.exit_code, 0) << rest.err;
    const auto a = series("sgd_full", "loss"), b = series("sgd_split", "loss");
    ASSERT_EQ(a.size(), 46u);
    ASSERT_EQ(b.size(), 46u);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << "step " << i + 1;
    EXPECT_EQ(llmt::read_file(root_ / "runs/sgd_full/checkpoints/step_46/model.safetensors"),
              llmt::read_file(root_ / "runs/sgd_split/checkpoints/step_46/model.safetensors"));
}

TEST_F(ClassifierTrain, TruncatedIdxIsExit2NamingTheOffset) {
    const std::string whole = llmt::read_file(root_ / "train-images");
    llmt::write_file_atomic(root_ / "short-images", whole.substr(0, 1000));
    auto r =
        run_process(bin(train("short", {"--set", "data.train_images=" + (root_ / "short-images").string()})), "", 120);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find((root_ / "short-images").string()), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("truncated at offset 1000"), std::string::npos) << r.err;
}

// trainer.conv_tf32 chooses how CUDA computes convolutions, so an MLP (no convolution) refuses it by name,
// as it refuses model.conv_channels.
TEST_F(ClassifierTrain, MlpRefusesConvTf32) {
    auto r = run_process(bin(train("mlp_tf32", {"--set", "model.arch=mlp", "--set", "model.conv_channels=[32, 64]",
                                                "--set", "trainer.conv_tf32=false"})),
                         "", 120);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("trainer.conv_tf32"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("model.arch cnn"), std::string::npos) << r.err;
}

}  // namespace
