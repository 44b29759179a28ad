// Metrics lines (a run's metrics.jsonl) served incrementally: per file an index of each complete
// line's step, byte offset and length, extended by reading only the bytes appended since the last
// look. A poll with since_step then reads only the lines after that step, never the whole file again.
// docs/server.md (the metrics route).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/file_version.h"

namespace llmt::server {

// Thread-safe. Holds the index of at most kMaxFiles files (the least recently polled leaves first); a
// file replaced or truncated (another inode, or shorter than what was indexed) is indexed again.
class MetricsIndex {
public:
    static constexpr size_t kMaxFiles = 64;

    struct Since {
        nlohmann::json points = nlohmann::json::array();  // the lines with step > since_step, in file order
        int64_t last_step = -1;                           // the largest step among them, else since_step
    };
    // The complete lines of `file` whose "step" is an integer > since_step; a missing file has none.
    // A line still being written (no newline yet) or that is not a JSON object is skipped.
    Since since(const std::filesystem::path& file, int64_t since_step);

private:
    struct Line {
        int64_t step;
        uint64_t offset;
        uint32_t length;
    };
    struct Entry {
        FileVersion version;
        uint64_t indexed = 0;  // bytes looked at: up to the last newline seen
        std::vector<Line> lines;
        uint64_t used = 0;     // when it was last polled, for eviction
    };
    // Brings `e` up to the file's end (complete lines only). Under mu_.
    static void extend(const std::filesystem::path& file, Entry& e);

    std::mutex mu_;
    std::map<std::filesystem::path, Entry> files_;
    uint64_t clock_ = 0;
};

}  // namespace llmt::server
