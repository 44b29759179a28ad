// The trainer's tasks (train/task.h) without the trainer: make_task picks language modelling or image
// classification from model.arch; each says its row width, throughput unit and best metric, opens its data
// (token shards, an IDX set written here), evaluates as the trainer and `llmtrain eval` do, and writes its
// end-of-run report and checkpoint files.
#include "train/task.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "config/loader.h"
#include "core/fs.h"
#include "data/shards/shard_writer.h"
#include "models/model.h"
#include "models/registry.h"
#include "train/batches.h"
#include "train/dist_context.h"

using namespace llmt;
using namespace llmt::train;

namespace {

namespace fs = std::filesystem;

config::Config load(const std::string& yaml) { return config::load_config_string(yaml, "<task_test>", {}); }

// An IDX pair of n 4x4 grey images: image i is all (i * 37) % 256, its label i % classes.
void write_idx(const fs::path& images, const fs::path& labels, int n, int classes) {
    auto header = [](std::vector<uint32_t> dims) {
        std::string s = {0, 0, 8, static_cast<char>(dims.size())};
        for (uint32_t d : dims)
            for (int k = 3; k >= 0; --k) s.push_back(static_cast<char>((d >> (8 * k)) & 0xff));
        return s;
    };
    std::string im = header({static_cast<uint32_t>(n), 4, 4}), lb = header({static_cast<uint32_t>(n)});
    for (int i = 0; i < n; ++i) {
        lb.push_back(static_cast<char>(i % classes));
        im.append(16, static_cast<char>((i * 37) % 256));
    }
    write_file_atomic(images, im);
    write_file_atomic(labels, lb);
}

class TempDir : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() /
               ("llmt_task_test_" + std::to_string(::getpid()) + "_" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }
    fs::path dir_;
};

using LanguageModelTask = TempDir;

TEST_F(LanguageModelTask, CountsTokensKeepsTheLowestLossAndEvaluatesTheValidationShards) {
    std::vector<uint32_t> tokens(600);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint32_t>((i * 7) % 64);
    data::write_shard_file(dir_ / "train_000.bin", tokens, 64);
    data::write_shard_file(dir_ / "val_000.bin", tokens, 64);
    const config::Config cfg = load("schema_version: 1\n"
                                    "run: {seed: 3, device: cpu, threads: 1}\n"
                                    "model: {arch: gpt2, n_layer: 1, n_head: 2, d_model: 16, block_size: 8, "
                                    "vocab_size: 64, vocab_pad_multiple: 64}\n"
                                    "trainer: {micro_batch_size: 2, eval_steps: 3}\n"
                                    "data: {source: shards, train_shards: " + (dir_ / "train_*.bin").string() +
                                    ", val_shards: " + (dir_ / "val_*.bin").string() + "}\n");
    const auto task = make_task(cfg);
    EXPECT_EQ(task->row_width(), 8);  // block_size
    const CountUnit u = task->unit();
    EXPECT_EQ(u.plural, "tokens");
    EXPECT_EQ(u.slots, 1);  // a token is a slot
    BestMetric best = task->best_metric();
    EXPECT_EQ(best.key(), "best_val_loss");
    EXPECT_TRUE(best.offer(2.0));
    EXPECT_TRUE(best.offer(1.5));  // lower is better
    EXPECT_FALSE(task->evaluates());  // no data opened yet
    EXPECT_FALSE(task->steps_for_epochs(1).has_value());  // the config refuses epochs for language models

    auto model = models::make_model(cfg, Device::kCpu, DType::kF32);
    model->init_random(3);
    DistContext dc = DistContext::single();
    const auto batches = task->open_training_data(*model, dc, 2);
    EXPECT_TRUE(batches->fixed_width());
    ASSERT_TRUE(task->evaluates());
    const Evaluation ev = task->evaluate(*model, dc, 2, 3);
    EXPECT_EQ(ev.fields["val_tokens"], 3 * 2 * 8);  // eval_steps batches of B x T
    EXPECT_EQ(ev.score, ev.loss);                   // the metric is the loss itself
    EXPECT_EQ(ev.fields["val_loss"].get<double>(), ev.loss);
    // `llmtrain eval` reads the same batches in one process: the same loss.
    const auto eval = task->evaluate_weights(*model, "w.safetensors");
    EXPECT_EQ(eval["val_loss"].get<double>(), ev.loss);
    EXPECT_EQ(eval["batches"], 3);
    EXPECT_TRUE(task->final_report(*model, dc, 2).summary.empty());
    // transformers' files beside the weights (the tokenizer's, when found, too).
    const fs::path step = dir_ / "step_1";
    fs::create_directories(step);
    (void)task->write_checkpoint_files(step);
    EXPECT_TRUE(fs::exists(step / "config.json"));
    EXPECT_TRUE(fs::exists(step / "generation_config.json"));
}

class ImageTask : public TempDir {
protected:
    void SetUp() override {
        TempDir::SetUp();
        write_idx(dir_ / "train-images", dir_ / "train-labels", 40, 3);
        write_idx(dir_ / "test-images", dir_ / "test-labels", 9, 3);
        cfg_ = load("schema_version: 1\n"
                    "run: {seed: 3, device: cpu, threads: 1}\n"
                    "model: {arch: mlp, image_size: 4, num_classes: 3, hidden_sizes: [8]}\n"
                    "trainer: {epochs: 3, micro_batch_size: 4, grad_accum_steps: 2}\n"
                    "data: {source: idx, val_fraction: 0.25, train_images: " + (dir_ / "train-images").string() +
                    ", train_labels: " + (dir_ / "train-labels").string() + ", test_images: " +
                    (dir_ / "test-images").string() + ", test_labels: " + (dir_ / "test-labels").string() + "}\n");
    }
    config::Config cfg_;
};

TEST_F(ImageTask, CountsImagesAndKeepsTheHighestAccuracy) {
    const auto task = make_task(cfg_);
    EXPECT_EQ(task->row_width(), 16);  // 4x4 pixels, one channel
    const CountUnit u = task->unit();
    EXPECT_EQ(u.plural, "images");
    EXPECT_EQ(u.slots, 16);  // an image is a row
    BestMetric best = task->best_metric();
    EXPECT_EQ(best.key(), "best_val_accuracy");
    EXPECT_TRUE(best.offer(0.5));
    EXPECT_FALSE(best.offer(0.25));  // higher is better
}

TEST_F(ImageTask, OpensTheSetsEvaluatesAndReportsTheTestSet) {
    const auto task = make_task(cfg_);
    auto model = models::make_model(cfg_, Device::kCpu, DType::kF32);
    model->init_random(3);
    DistContext dc = DistContext::single();
    const auto batches = task->open_training_data(*model, dc, 4);
    EXPECT_EQ(batches->num_rows(), 30u);  // 40 images, a quarter kept for validation
    // 3 epochs of ceil(30 / 4) = 8 micro-batches, 2 per optimizer step.
    EXPECT_EQ(task->steps_for_epochs(1), 12);
    EXPECT_EQ(task->steps_for_epochs(2), 6);  // each rank reads half of each epoch
    ASSERT_TRUE(task->evaluates());
    const Evaluation ev = task->evaluate(*model, dc, 4, 1);
    EXPECT_EQ(ev.fields["val_images"], 10);
    EXPECT_EQ(ev.score, ev.fields["val_accuracy"].get<double>());
    EXPECT_EQ(ev.loss, ev.fields["val_loss"].get<double>());
    const FinalReport r = task->final_report(*model, dc, 4);
    EXPECT_EQ(r.summary["test_images"], 9);
    EXPECT_EQ(r.summary["confusion_matrix"].size(), 3u);
    EXPECT_EQ(r.metrics["test_images"], 9);
    EXPECT_NE(r.log.find("confusion matrix"), std::string::npos) << r.log;
    EXPECT_FALSE(task->write_checkpoint_files(dir_).has_value());
    EXPECT_FALSE(fs::exists(dir_ / "config.json"));  // no transformers counterpart
    const auto eval = task->evaluate_weights(*model, "weights.safetensors");
    EXPECT_EQ(eval["test_images"], 9);
    EXPECT_EQ(eval["test_accuracy"], r.summary["test_accuracy"]);
    EXPECT_EQ(eval["weights"], "weights.safetensors");
}

}  // namespace
