// Wall-clock helpers: UTC timestamps for run ids and metadata, a monotonic stopwatch.
#pragma once

#include <chrono>
#include <string>

namespace llmt {

// "2026-11-26T02:48:05Z" (ISO 8601, UTC, seconds).
std::string utc_iso8601_now();
// "20261126T024805Z": sortable, safe in file names and DNS labels (lower-cased by callers if needed).
std::string utc_compact_now();

class Stopwatch {
public:
    Stopwatch() : start_(std::chrono::steady_clock::now()) {}
    void reset() { start_ = std::chrono::steady_clock::now(); }
    double seconds() const {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    }

private:
    std::chrono::steady_clock::time_point start_;
};

}  // namespace llmt
