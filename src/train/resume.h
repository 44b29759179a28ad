// Resolving what `--resume` names, and deciding whether a checkpoint may continue under a config:
// identity keys (architecture, sizes, vocabulary, tokenizer, block size, data sources, seed) must match;
// run-length and cadence keys may change (reported); anything else that changed is reported too.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"

namespace llmt::train {

struct ResumeTarget {
    std::filesystem::path run_dir;
    std::optional<std::filesystem::path> checkpoint;  // a step_N dir; nullopt: start this run fresh
};

// spec: "auto" | run id | run dir | checkpoints dir | step_N dir | s3://bucket/prefix/<run id>[/checkpoints/
// step_N] (fetched into output.root_dir/<run id>/ first: remote_checkpoint.h). For "auto" a run without any
// checkpoint (or with no directory yet) returns no checkpoint; with output.sync set, a synced step newer
// than the local ones is fetched first. Throws InputError naming every place looked at,
// naming the file type when spec is an existing file that is not a directory (a FIFO is never opened),
// and UsageError for an empty spec.
ResumeTarget resolve_resume(const std::string& spec, const config::Config& cfg);

// Differences between the checkpoint's resolved config and the current one.
struct ConfigDiff {
    std::vector<std::string> identity;  // refuse when non-empty: "model.n_layer: 4 -> 6"
    std::vector<std::string> cadence;   // allowed: max_steps, eval/save/log_every_steps, eval_steps, keep_last
    std::vector<std::string> other;     // allowed, reported (lr, weight decay, ...)
};
ConfigDiff diff_for_resume(const nlohmann::json& saved_resolved, const nlohmann::json& current_resolved);

}  // namespace llmt::train
