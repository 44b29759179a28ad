// Test support for trainer tests through the real binary: a small corpus a tiny model learns in a few
// dozen steps, prepared into shards with `llmtrain data prepare`, and reading a run's metrics.jsonl.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
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

}  // namespace llmt::testing
