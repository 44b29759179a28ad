// A job's result as the API shows it (docs/server.md "Results"): the run directory's summary.json read
// into `result` of GET /v1/jobs/{id} (its top-level scalars, and a classifier's evaluation:
// per_class_accuracy, confusion_matrix, class_names) and, compact, into each job of GET /v1/jobs.
// The list is polled, so each summary is parsed once per file version and served from memory after.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "server/file_version.h"

namespace llmt::server {

// The keys of the compact form, in the order the list shows them.
inline constexpr const char* kCompactResultKeys[] = {"final_train_loss", "final_val_loss", "best_val_loss",
                                                     "test_accuracy"};

// summary.json's text -> the full `result` object: every top-level scalar (number, string, bool,
// null) as written; `per_class_accuracy` (N numbers or nulls), `confusion_matrix` (N x N non-negative
// integer counts, rows the true class, columns the predicted one) and `class_names` (N strings) when
// present and of matching sizes. A classifier field of the wrong shape is left out and named in
// `invalid` ("confusion_matrix: row 3 has 9 entries, expected 10"). Other arrays and objects are not
// copied. Throws FormatError (JsonParseError) when the text is not a JSON object.
nlohmann::json result_from_summary(const std::string& text, const std::string& source);

// The compact form of a full result: the kCompactResultKeys it has (numbers or null), nothing else.
nlohmann::json compact_result(const nlohmann::json& result);

// Thread-safe. Each lookup stats <run_dir>/summary.json: the file is read again only when its inode,
// size, mtime or ctime changed (the trainer replaces it atomically at the end of every attempt).
// At most kMaxEntries run directories and kMaxCachedBytes of parsed results (counted as the values,
// members and strings they hold) are remembered; past either the cache starts over. Of a result over
// kMaxCachedBytes / 8 (a classifier's confusion matrix of a thousand classes) only the compact form
// is kept, and the full one is parsed again when asked for.
class JobResultCache {
public:
    static constexpr size_t kMaxEntries = 8192;
    static constexpr size_t kMaxSummaryBytes = size_t{16} << 20;
    static constexpr size_t kMaxCachedBytes = size_t{16} << 20;

    // The full result of the run in `run_dir`; null when it has no summary.json (not finished, or its
    // files are not on this host, as with the Kubernetes executor). A summary that cannot be read or
    // parsed gives {"error": "<why>"}, never an exception.
    nlohmann::json full(const std::filesystem::path& run_dir);
    // compact_result(full(run_dir)); null when there is no summary.json; {"error"} as full.
    nlohmann::json compact(const std::filesystem::path& run_dir);

    uint64_t parses() const;  // summaries read and parsed since the start (for tests)

private:
    struct Entry {
        FileVersion version;
        nlohmann::json full, compact;
        size_t bytes = 0;  // what full and compact hold, about: what it counts against kMaxCachedBytes
        bool has_full = true;  // false: only compact was kept
    };
    // The entry for the summary as it is now; nullptr when there is none.
    std::shared_ptr<const Entry> entry(const std::filesystem::path& run_dir);

    mutable std::mutex mu_;
    std::map<std::string, std::shared_ptr<const Entry>> entries_;  // by run directory
    size_t cached_bytes_ = 0;
    uint64_t parses_ = 0;
};

}  // namespace llmt::server
