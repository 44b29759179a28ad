// Test support: train::run_training in-process on a tiny GPT-2 (2 layers, d 16, vocab 64, T 8) over
// synthetic llm.c shards in a temp directory, configured by --set overrides of one base YAML. A run of a
// few steps takes milliseconds, so tests can compare many runs that differ in one key.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "config/loader.h"
#include "data/shards/shard_writer.h"
#include "support/train_fixture.h"
#include "train/trainer.h"

namespace llmt::testing {

class TinyRun {
public:
    static constexpr int kVocab = 64;

    explicit TinyRun(const std::string& tag)
        : root_(std::filesystem::temp_directory_path() / ("llmt_" + tag + "_" + std::to_string(::getpid()))) {
        std::filesystem::remove_all(root_);
        std::filesystem::create_directories(root_ / "shards");
        // A repeating pattern with some structure, so the loss moves in a few steps.
        std::vector<uint32_t> train(4096), val(512);
        for (size_t i = 0; i < train.size(); ++i) train[i] = static_cast<uint32_t>((i * 7 + i / 13) % kVocab);
        for (size_t i = 0; i < val.size(); ++i) val[i] = static_cast<uint32_t>((i * 5 + i / 11) % kVocab);
        data::write_shard_file(root_ / "shards/train_000000.bin", train, kVocab);
        data::write_shard_file(root_ / "shards/val_000000.bin", val, kVocab);
    }
    ~TinyRun() {
        std::error_code ec;
        std::filesystem::remove_all(root_, ec);
    }
    TinyRun(const TinyRun&) = delete;
    TinyRun& operator=(const TinyRun&) = delete;

    const std::filesystem::path& root() const { return root_; }

    // The base config: CPU, fp32, one thread (at these sizes OpenMP threads only wait for each other), 3
    // steps, evaluation and checkpoints off until the end.
    std::string base_yaml() const {
        return R"(schema_version: 1
run: {name: tiny, seed: 7, device: cpu, threads: 1}
model: {arch: gpt2, n_layer: 2, n_head: 2, d_model: 16, block_size: 8, vocab_size: 64, vocab_pad_multiple: 64}
trainer: {max_steps: 3, micro_batch_size: 2, lr: 1.0e-2, min_lr: 1.0e-3, warmup_steps: 1, log_every_steps: 1,
          eval_every_steps: 0, eval_steps: 2, save_every_steps: 0, keep_last: 1}
data: {source: shards, train_shards: ")" +
               (root_ / "shards/train_*.bin").string() + R"(", val_shards: ")" +
               (root_ / "shards/val_*.bin").string() + R"("}
output: {root_dir: ")" + (root_ / "runs").string() +
               R"("}
)";
    }

    // The base config with `sets` ("key=value") applied; throws config::ConfigValidationError.
    config::Config config(const std::vector<std::string>& sets = {}) const {
        return config::load_config_string(base_yaml(), "<tiny>", sets);
    }

    // Trains (or, with dry_run, runs one forward) and returns the summary.
    nlohmann::ordered_json train(const config::Config& cfg, bool dry_run = false) const {
        train::TrainOptions o;
        o.cfg = cfg;
        o.dry_run = dry_run;
        o.progress = false;
        return train::run_training(o).summary;
    }
    nlohmann::ordered_json train(const std::vector<std::string>& sets, bool dry_run = false) const {
        return train(config(sets), dry_run);
    }

    // The run directory of a summary, and its metrics.jsonl lines.
    std::filesystem::path run_dir(const nlohmann::ordered_json& summary) const {
        return root_ / "runs" / summary.at("run_id").get<std::string>();
    }
    std::vector<nlohmann::json> metrics(const nlohmann::ordered_json& summary) const {
        return read_metrics(run_dir(summary) / "metrics.jsonl");
    }

private:
    std::filesystem::path root_;
};

}  // namespace llmt::testing
