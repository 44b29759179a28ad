// Checkpoints in object storage (docs/object_storage.md "Layout"): under <output.sync>/<run id>/ the run's
// small files (config.yaml, meta.json, metrics.jsonl, summary.json) and checkpoints/step_<N>/ holding the
// step directory's files, then its marker object step_<N>/_SYNCED.json, written last: a step counts as
// synced only when the marker is there (it lists each file with its size, checked again on download, and
// the number of parts it was uploaded in).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "storage/s3_uri.h"

namespace llmt::config {
struct Config;
}
namespace llmt::storage {
class S3Client;
}

namespace llmt::train {

inline constexpr const char* kSyncedMarker = "_SYNCED.json";
// The run directory's small files, uploaded after each checkpoint and at the end, fetched on resume.
inline const std::vector<std::string>& synced_run_files() {
    static const std::vector<std::string> files = {"config.yaml", "meta.json", "metrics.jsonl", "summary.json"};
    return files;
}

// <sync>/<run_id>
storage::S3Uri synced_run_uri(const std::string& sync, const std::string& run_id);

// The steps under run/checkpoints/ whose marker is present, ascending.
std::vector<std::int64_t> synced_steps(storage::S3Client& client, const storage::S3Uri& run);

// Downloads run/checkpoints/step_<step>/ into local_run/checkpoints/step_<step>/ (through a temp directory
// renamed into place; an existing step directory is kept as is), and the run's small files that are
// there into local_run/ (replacing local ones). Every file the marker lists must arrive with its size.
// Returns the local step directory. Throws CheckpointError when the marker is missing or a file's size
// differs, StorageError for the store.
std::filesystem::path fetch_synced_checkpoint(storage::S3Client& client, const storage::S3Uri& run, std::int64_t step,
                                              const std::filesystem::path& local_run, std::uint64_t part_bytes);

// --resume s3://bucket/prefix/<run id>[/checkpoints/step_<N>]: fetches that step (default: the newest
// synced one) into output.root_dir/<run id>/, the local cache, and returns the local step directory.
// Throws InputError when the URI names no run or the run has no synced step (naming the URI).
std::filesystem::path fetch_for_resume(const std::string& spec, const config::Config& cfg);

// --resume auto with output.sync: when the store holds a synced step of output.run_id newer than every
// local one, fetches it (so a run whose node lost its disk goes on from the store). Logs what it did.
void fetch_newer_for_auto(const config::Config& cfg, const std::function<void(const std::string&)>& log);

}  // namespace llmt::train
