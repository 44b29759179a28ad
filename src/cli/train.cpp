// `llmtrain train` and `llmtrain eval`: thin wrappers over train/trainer.h.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdint>
#include <optional>

#include "cli/checkpoint_model.h"
#include "cli/command.h"
#include "cli/config_options.h"
#include "core/error.h"
#include "train/run_plan.h"
#include "train/trainer.h"

namespace llmt::cli {

void register_train(CLI::App& app, Runtime& rt) {
    auto* cmd = app.add_subcommand("train", "Train a model from a config (checkpoints, resume, graceful SIGTERM)");
    auto opts = add_config_options(cmd);
    auto resume = std::make_shared<std::string>();
    auto dry = std::make_shared<bool>(false);
    auto json = std::make_shared<bool>(false);
    auto stop_at = std::make_shared<int64_t>(0);
    cmd->add_option("--stop-at-step", *stop_at,
                    "stop after this optimizer step with a checkpoint (exit 0); the LR schedule still runs to "
                    "trainer.max_steps, so a later --resume continues exactly")
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--resume", *resume,
                    "continue a run: auto | RUN_ID | runs/RUN_ID | PATH/TO/checkpoints/step_N | "
                    "s3://BUCKET/PREFIX/RUN_ID[/checkpoints/step_N] (auto resumes output.run_id if it has a "
                    "checkpoint, here or, with output.sync, in the store; else starts it)");
    auto max_memory = std::make_shared<std::string>();
    cmd->add_option("--max-memory", *max_memory,
                    "refuse to start when the estimated memory per process (parameters, gradients, optimizer state, "
                    "activations) exceeds SIZE (e.g. 64GiB); default: the GPU's memory or the host's MemAvailable");
    cmd->add_flag("--dry-run", *dry, "one forward pass: parameter count, memory plan and loss; no update, no files");
    cmd->add_flag("--json", *json, "print the summary as one JSON document on stdout");
    cmd->callback([cmd, opts, resume, dry, json, stop_at, max_memory, &rt] {
        // An empty value would read as "no --resume" and start a fresh run.
        if (cmd->count("--resume") > 0 && resume->empty())
            throw UsageError("--resume needs a path, a run id or 'auto' (got an empty string)");
        std::optional<std::uint64_t> limit;
        if (!max_memory->empty()) limit = train::parse_memory_size(*max_memory);
        train::TrainOptions to{load_config(*opts), *resume, *dry, rt.argv, true, *stop_at, limit};
        auto result = train::run_training(to);
        if (*json || *dry) fmt::print("{}\n", result.summary.dump(*json ? -1 : 2));
        rt.exit_code = result.exit_code;
    });
}

void register_eval(CLI::App& app, Runtime& rt) {
    auto* cmd =
        app.add_subcommand("eval", "Validation loss of a checkpoint (or model.init_from), as training computes it");
    auto opts = add_config_options(cmd, false);
    auto ckpt = std::make_shared<std::string>();
    auto json = std::make_shared<bool>(false);
    cmd->add_option("--checkpoint", *ckpt,
                    "a checkpoints/step_N directory, a checkpoints/ directory or a run directory");
    cmd->add_flag("--json", *json, "print {\"val_loss\": x, \"tokens\": n} as one JSON document");
    cmd->callback([opts, ckpt, json, &rt] {
        auto r = train::run_evaluation(checkpoint_run_config("eval", *ckpt, opts->path, opts->sets), *ckpt);
        if (*json) {
            fmt::print("{}\n", r.dump());
        } else if (r.contains("test_accuracy")) {  // a classifier (its table went to stderr)
            fmt::print("test_accuracy {:.4f} test_loss {:.6f} over {} images of {}\n",
                       r["test_accuracy"].get<double>(), r["test_loss"].get<double>(), r["test_images"].get<int64_t>(),
                       r["weights"].get<std::string>());
        } else {
            fmt::print("val_loss {:.6f} over {} tokens ({} batches) of {}\n", r["val_loss"].get<double>(),
                       r["tokens"].get<int64_t>(), r["batches"].get<int64_t>(), r["weights"].get<std::string>());
        }
        rt.exit_code = 0;
    });
}

}  // namespace llmt::cli
