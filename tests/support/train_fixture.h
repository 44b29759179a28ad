// Test support for trainer tests through the real binary: a small corpus a tiny model learns in a few
// dozen steps, prepared into shards with `llmtrain data prepare`, and reading a run's metrics.jsonl.
#pragma once

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/fs.h"
#include "support/subprocess.h"

namespace llmt::testing {

// Counting sentences: structure a tiny model learns in a few dozen steps.
inline std::string synthetic_corpus() {
    std::string s;
    const char* names[] = {"alpha", "beta", "gamma", "delta", "omega"};
    for (int d = 0; d < 400; ++d) {
        for (int i = 0; i < 12; ++i)
            s += std::string("The ") + names[(d + i) % 5] + " counts " + std::to_string(i) + " and " +
                 std::to_string(i + 1) + ".\n";
        s += "\n";
    }
    return s;
}

// Writes root/corpus.txt and prepares root/shards/{train,val}_*.bin (10% validation).
inline ProcResult prepare_synthetic_shards(const std::filesystem::path& root) {
    write_file_atomic(root / "corpus.txt", synthetic_corpus());
    return run_process({llmtrain_bin(), "data", "prepare", "--input", (root / "corpus.txt").string(), "--format",
                        "text", "--out", (root / "shards").string(), "--val-fraction", "0.1"},
                       "", 300);
}

// Every line of a metrics.jsonl, parsed.
inline std::vector<nlohmann::json> read_metrics(const std::filesystem::path& metrics_jsonl) {
    std::vector<nlohmann::json> out;
    std::istringstream in(read_file(metrics_jsonl));
    std::string line;
    while (std::getline(in, line))
        if (!line.empty()) out.push_back(nlohmann::json::parse(line));
    return out;
}

// `train` of the config file `config` as run `run_id` under runs_root, then `extra`.
inline std::vector<std::string> train_command(const std::filesystem::path& config,
                                              const std::filesystem::path& runs_root, const std::string& run_id,
                                              std::vector<std::string> extra = {}) {
    std::vector<std::string> a = {"train", "--config", config.string(),
                                  "--set", "output.root_dir=" + runs_root.string(),
                                  "--set", "output.run_id=" + run_id};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
}

// `key` of every record of a metrics.jsonl that has it, in order.
inline std::vector<double> metric_series(const std::filesystem::path& metrics_jsonl, const char* key) {
    std::vector<double> v;
    for (const auto& m : read_metrics(metrics_jsonl))
        if (m.contains(key)) v.push_back(m[key]);
    return v;
}

// `args` as a command line of the binary under test.
inline std::vector<std::string> with_bin(std::vector<std::string> args) {
    args.insert(args.begin(), llmtrain_bin());
    return args;
}

// A suite's runs on the synthetic shards: root (temp_directory_path()/<prefix>_<pid>) holds the shards and
// tiny.yaml (`yaml_head`, then a data section naming the shards); runs go under root/runs/<run_id>.
class TinyRuns {
public:
    // Creates root, its shards and tiny.yaml; returns what `data prepare` said.
    ProcResult create(const std::string& prefix, const std::string& yaml_head) {
        root_ = std::filesystem::temp_directory_path() / (prefix + "_" + std::to_string(::getpid()));
        std::filesystem::create_directories(root_);
        ProcResult r = prepare_synthetic_shards(root_);
        std::ofstream(root_ / "tiny.yaml") << yaml_head << "data: {train_shards: "
                                           << (root_ / "shards/train_*.bin").string()
                                           << ", val_shards: " << (root_ / "shards/val_*.bin").string() << "}\n";
        return r;
    }
    void remove() const { std::filesystem::remove_all(root_); }
    const std::filesystem::path& root() const { return root_; }

    // `train` of tiny.yaml as run `run_id`, then `extra`.
    std::vector<std::string> train_args(const std::string& run_id, std::vector<std::string> extra = {}) const {
        return train_command(root_ / "tiny.yaml", root_ / "runs", run_id, std::move(extra));
    }
    std::vector<nlohmann::json> metrics(const std::string& run_id) const {
        return read_metrics(root_ / "runs" / run_id / "metrics.jsonl");
    }
    // `key` of every metrics record of the run that has it, in order.
    std::vector<double> series(const std::string& run_id, const char* key) const {
        return metric_series(root_ / "runs" / run_id / "metrics.jsonl", key);
    }

private:
    std::filesystem::path root_;
};

}  // namespace llmt::testing
