// A workload the Trainer runs: what it reads, how it evaluates and which metric keeps checkpoints/best,
// what its throughput counts, what the end of a run adds to summary.json, which files a checkpoint
// holds beside the weights, and what `llmtrain eval` reports. The Trainer (train/trainer.cpp) runs steps,
// schedules, checkpoints and signals for any task. Two tasks: language modelling (train/lm_task.h) and
// image classification (train/image_task.h); make_task picks one from model.arch. docs/architecture.md
// "Tasks". Not thread-safe: one per run, called by the Trainer's thread.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "train/best_metric.h"

namespace llmt::config {
struct Config;
}
namespace llmt::models {
class Model;
}

namespace llmt::train {

class DistContext;
class TrainBatches;

// What a task's throughput counts. The Trainer counts batch slots (B x T per micro-batch, every rank);
// one unit is `slots` of them: a token is one slot, an image a row of T pixels.
struct CountUnit {
    std::string plural;    // "tokens" | "images": metrics.jsonl's and summary.json's fields (tokens_per_sec, ...)
    std::string singular;  // "token" | "image"
    std::string rate;      // the step log's unit: "tok/s" | "img/s"
    int64_t slots = 1;
};

// One evaluation of the weights on the validation data, the same on every rank.
struct Evaluation {
    double loss = 0;                // mean validation loss: final_val_loss, best_val_loss
    double score = 0;               // the value of the task's best metric (Task::best_metric)
    nlohmann::ordered_json fields;  // metrics.jsonl's record after "step" (val_loss, ...)
    std::string text;               // the log line after "eval step N: "
};

// What the end of a completed run adds: fields of summary.json, a record of metrics.jsonl (after "step";
// empty: none) and lines for the log (empty: none).
struct FinalReport {
    nlohmann::ordered_json summary = nlohmann::ordered_json::object();
    nlohmann::ordered_json metrics = nlohmann::ordered_json::object();
    std::string log;
};

class Task {
public:
    virtual ~Task() = default;

    // Values per batch row, the T of the trainer's (B, T) batches.
    virtual int row_width() const = 0;
    virtual CountUnit unit() const = 0;
    // The metric whose improvement keeps checkpoints/best, with no value yet.
    virtual BestMetric best_metric() const = 0;

    // Opens this rank's training batches of B rows and the validation data evaluate() reads; `model` is the
    // model being trained. Every rank calls it (data one rank prepares for all is waited for). Throws
    // InputError for missing or malformed data.
    virtual std::unique_ptr<TrainBatches> open_training_data(models::Model& model, DistContext& dc, int B) = 0;
    // trainer.epochs as optimizer steps of `world` ranks, once open_training_data has run; nullopt where
    // the run's length is trainer.max_steps alone (the config refuses epochs there).
    virtual std::optional<int64_t> steps_for_epochs(int world) const = 0;

    // Whether there is validation data.
    virtual bool evaluates() const = 0;
    // The validation data through `model` without training, B rows at a time (`eval_steps` batches where the
    // task takes a sample), summed over the ranks of `dc`. Every rank calls it.
    virtual Evaluation evaluate(models::Model& model, DistContext& dc, int B, int64_t eval_steps) = 0;
    // The end of a run that was not interrupted. Every rank calls it.
    virtual FinalReport final_report(models::Model& model, DistContext& dc, int B) = 0;

    // The files beside the weights that the ecosystem's loaders read, into a checkpoint's directory `dir`
    // (rank 0). Returns a note for the log, once, when some could not be written.
    virtual std::optional<std::string> write_checkpoint_files(const std::filesystem::path& dir) = 0;

    // `llmtrain eval`, one process: `model`'s weights (read from `source`) on the task's evaluation data,
    // with "weights": source. Throws InputError when there is nothing to evaluate on.
    virtual nlohmann::ordered_json evaluate_weights(models::Model& model, const std::string& source) = 0;
};

// The task of `cfg` (with model.init_from's config.json applied): image classification for the image
// classifiers' model.arch, language modelling otherwise.
std::unique_ptr<Task> make_task(const config::Config& cfg);

}  // namespace llmt::train
