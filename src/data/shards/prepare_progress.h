// Progress reporting for long data jobs on stderr: a redrawn bar (bytes, MB/s, ETA) when stderr is a
// terminal, a plain line every few seconds otherwise (CI logs, `2> file`), so logs stay readable.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace llmt::data {

// Not thread-safe: call from the thread that does the work.
class Progress {
public:
    // total_bytes may be 0 (unknown): then no percentage or ETA is shown. `tty` is normally
    // isatty(fileno(stderr)); `out` nullptr silences it.
    Progress(std::string label, uint64_t total_bytes, bool tty, std::FILE* out);
    // Reports that done_bytes of total have been processed; redraws at most 10 times a second (tty)
    // or prints every 5 seconds (plain).
    void update(uint64_t done_bytes);
    // Final line (always printed) with the total time and throughput and `extra`.
    void finish(const std::string& extra);

private:
    std::string line(uint64_t done, double secs) const;

    std::string label_;
    uint64_t total_;
    bool tty_;
    std::FILE* out_;
    std::chrono::steady_clock::time_point start_;
    std::chrono::steady_clock::time_point last_;
};

}  // namespace llmt::data
