// Metrics lines (a run's metrics.jsonl) served incrementally: per file an index of its complete lines'
// steps and byte ranges, extended by reading only the bytes appended since the last look. A poll with
// since_step then reads only the lines after that step, never the whole file again. Memory and answers
// are bounded whatever the files hold: the index keeps per file at most kMaxBlocksPerFile ranges of
// lines (a range per line while a file has fewer lines; past that neighbouring ranges merge, each
// keeping its largest step), and an answer holds at most kMaxPoints lines and kMaxAnswerBytes of them
// (`truncated`: the client asks again from `last_step`). docs/server.md (the metrics route).
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
// file replaced or truncated (another inode, or shorter than what was indexed) is indexed again. At
// most kMaxFiles x kMaxBlocksPerFile x 32 bytes (32 MiB) of index in all.
class MetricsIndex {
public:
    static constexpr size_t kMaxFiles = 64;
    static constexpr size_t kMaxBlocksPerFile = 16384;
    static constexpr size_t kMaxPoints = 10000;
    static constexpr size_t kMaxAnswerBytes = size_t{8} << 20;

    struct Since {
        nlohmann::json points = nlohmann::json::array();  // the lines with step > since_step, in file order
        int64_t last_step = -1;                           // the largest step among them, else since_step
        bool truncated = false;  // stopped at kMaxPoints or kMaxAnswerBytes: more lines follow last_step
    };
    // The first complete lines of `file` whose "step" is an integer > since_step, up to the answer's
    // bounds; a missing file has none. A line still being written (no newline yet) or that is not a
    // JSON object is skipped.
    Since since(const std::filesystem::path& file, int64_t since_step);

private:
    // Consecutive lines with a step: bytes [offset, end) (the last line's newline excluded).
    struct Block {
        uint64_t offset;
        uint64_t end;
        int64_t max_step;  // the largest step of its lines
        uint64_t lines;
    };
    struct Entry {
        FileVersion version;
        uint64_t indexed = 0;  // bytes looked at: up to the last newline seen
        uint64_t stride = 1;   // lines per block (the last may hold fewer)
        std::vector<Block> blocks;
        uint64_t used = 0;     // when it was last polled, for eviction
    };
    // Brings `e` up to the file's end (complete lines only). Under mu_.
    static void extend(const std::filesystem::path& file, Entry& e);
    // Records one line with a step; past kMaxBlocksPerFile blocks, merges neighbours (stride x 2).
    static void add_line(Entry& e, uint64_t offset, uint64_t end, int64_t step);

    std::mutex mu_;
    std::map<std::filesystem::path, Entry> files_;
    uint64_t clock_ = 0;
};

}  // namespace llmt::server
