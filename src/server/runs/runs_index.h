// Run directories the server did not start (`llmtrain serve --runs-dir DIR`, repeatable), indexed
// read-only beside its own jobs, as TensorBoard indexes a log directory: each directory directly under
// a root that holds a run's files (config.yaml, meta.json or metrics.jsonl; docs/formats/run_dir.md) is
// a run. docs/server.md "Indexed runs"; the confinement rules are docs/security.md "Indexed runs".
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace llmt::server {

// One indexed run. `dir` is canonical and lies strictly inside roots()[root].
struct IndexedRun {
    size_t root = 0;    // index into RunsIndex::roots()
    std::string name;   // the directory's name (the run id llmtrain train gave it)
    std::filesystem::path dir;
    std::string key() const;  // "<root>/<name>": its place in the list and its id in URLs
};

// Thread-safe. The list is a snapshot, taken at construction and again by refresh() once it is older
// than the rescan interval; a scan reads directory entries and stats only (never a file's bytes), at
// most kMaxEntriesPerScan entries in all, keeping at most kMaxRuns runs. Nothing is ever written under
// a root.
class RunsIndex {
public:
    static constexpr size_t kMaxRuns = 10000;
    static constexpr size_t kMaxEntriesPerScan = 100000;

    // `roots` must be existing directories (relative ones resolve against the working directory);
    // throws UsageError naming `flag` and the root otherwise. An empty list indexes nothing.
    RunsIndex(const std::vector<std::filesystem::path>& roots, std::chrono::milliseconds rescan_every,
              const std::string& flag = "--runs-dir");

    const std::vector<std::filesystem::path>& roots() const { return roots_; }  // canonical

    // Rescans when the snapshot is older than the interval (one scan at a time; callers meanwhile see
    // the previous snapshot).
    void refresh();
    void rescan();  // unconditionally

    struct Page {
        std::vector<IndexedRun> runs;  // sorted by (root, name)
        std::optional<std::string> next_after;  // the cursor of the next page; nullopt on the last one
        size_t total = 0;
        bool truncated = false;  // the last scan stopped at a bound (kMaxRuns or kMaxEntriesPerScan)
    };
    // At most `limit` runs whose key sorts after `after` ("" = from the start).
    Page list(const std::string& after, size_t limit) const;

    // The run with this root index and name, as of the last scan; nullopt if there is none. Names
    // come from the scan, never from the request, so no request chooses a path.
    std::optional<IndexedRun> find(size_t root, std::string_view name) const;

    // The regular file `rel` (a fixed relative name such as "metrics.jsonl" or "logs/rank0.log")
    // of `run`, canonical, when it resolves inside the run's directory (a symlink pointing out of it,
    // or anything but a regular file, is nullopt, as is a missing one).
    static std::optional<std::filesystem::path> file(const IndexedRun& run, std::string_view rel);

    // The ranks k with a logs/rank<k>.log file in the run, ascending (at most 1024 looked at).
    static std::vector<int> log_ranks(const IndexedRun& run);

private:
    struct Snapshot {
        std::vector<IndexedRun> runs;  // sorted by (root, name)
        bool truncated = false;
        std::chrono::steady_clock::time_point taken;
    };
    std::shared_ptr<const Snapshot> scan() const;
    std::shared_ptr<const Snapshot> current() const;

    std::vector<std::filesystem::path> roots_;
    std::chrono::milliseconds rescan_every_;
    mutable std::mutex mu_;       // guards snapshot_
    std::mutex scan_mu_;          // one scan at a time
    std::shared_ptr<const Snapshot> snapshot_;
};

// True when `name` may be an indexed run's directory name: 1 to 200 bytes of letters, digits, '.', '_'
// and '-', not starting with '.' (so never "." or "..", and URL-safe as it stands). Others are skipped.
bool valid_run_name(std::string_view name);

}  // namespace llmt::server
