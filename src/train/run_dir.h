// The run directory (docs/design.md §3, docs/formats/run_dir.md): runs/<run_id>/ with config.yaml (resolved),
// meta.json, metrics.jsonl, logs/, checkpoints/, summary.json. Only rank 0 creates it.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "config/config.h"

namespace llmt::train {

// Facts about this process recorded in meta.json.
struct RunMeta {
    std::vector<std::string> argv;
    int world_size = 1;
    std::string device = "cpu";
    nlohmann::ordered_json precision;  // trainer.precision as resolved (cpu_precision.h to_json); null: left out
};

class RunDir {
public:
    // "<name>-<UTC yyyymmddThhmmssZ>-<6 hex>": unique, and sorts by start time for one name.
    static std::string make_run_id(const std::string& name);

    // Creates <root_dir>/<run_id>/ (run_id = output.run_id, or a new one) with config.yaml and meta.json.
    // An existing directory is never overwritten: throws InputError naming it (resume instead).
    static RunDir create(const config::Config& cfg, const RunMeta& meta);

    // Opens an existing run directory (for --resume); throws InputError listing what was looked for.
    static RunDir open(const std::filesystem::path& dir);

    const std::filesystem::path& path() const { return path_; }
    const std::string& run_id() const { return run_id_; }
    std::filesystem::path config_path() const { return path_ / "config.yaml"; }
    std::filesystem::path meta_path() const { return path_ / "meta.json"; }
    std::filesystem::path metrics_path() const { return path_ / "metrics.jsonl"; }
    std::filesystem::path summary_path() const { return path_ / "summary.json"; }
    std::filesystem::path logs_dir() const { return path_ / "logs"; }
    std::filesystem::path checkpoints_dir() const { return path_ / "checkpoints"; }

private:
    RunDir(std::filesystem::path path, std::string run_id) : path_(std::move(path)), run_id_(std::move(run_id)) {}
    std::filesystem::path path_;
    std::string run_id_;
};

// meta.json content for this process (version, git SHA, argv, hostname, pid, start time, world size, device).
nlohmann::ordered_json make_meta_json(const RunMeta& meta, const std::string& run_id);

}  // namespace llmt::train
