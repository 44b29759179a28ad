// The trainer's console: log lines to stderr (rank 0) and to logs/rank<k>.log (every rank, each line
// with a UTC timestamp), and on a terminal a progress bar kept on the bottom line below them.
//
// On a terminal every line is printed in full above the bar (so the loss history stays on screen) and the
// bar is redrawn after it; the bar itself never reaches the log file. Not on a terminal there is no bar:
// stderr gets exactly the lines the file gets, without the timestamps.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace llmt::train {

// What the bar shows after a step.
struct Progress {
    int64_t step = 0, max_steps = 0;
    double loss = 0;          // the step's training loss
    double seconds_per_step = 0;  // mean over this process's steps so far
};

// "[#####-----]  12/300   4% | loss 9.2345 | 2.10 s/step | eta 10m05s": `width` cells of bar.
std::string progress_text(const Progress& p, int width = 20);
// 59 -> "59s", 605 -> "10m05s", 7322 -> "2h02m"; negative or non-finite -> "?".
std::string short_duration(double seconds);

class Console {
public:
    ~Console();
    // Where lines go: stderr (rank 0 only), the file once the run directory exists. Lines before it (the
    // model, the device, the precision chosen) are kept, up to kMaxEarlyLines, and written when it opens.
    void set_stderr(bool on) { to_stderr_ = on; }
    void open_file(const std::filesystem::path& logs_dir, int rank);
    // Closes the file: the lines of a run that starts next in this process wait for its own.
    void close_file();
    static constexpr size_t kMaxEarlyLines = 256;
    // The bar: only with stderr on and a terminal there.
    void enable_progress(bool on);
    bool progress_enabled() const { return bar_; }
    // One line (an embedded '\n' makes several, each timestamped in the file; empty ones are dropped).
    void line(const std::string& s);
    // Redraws the bar (terminal only): after every step, one short write (a step takes far longer).
    void progress(const Progress& p);
    // Leaves the bar on screen as the last line and moves below it.
    void end_progress();

private:
    void clear_bar();
    void draw_bar();

    bool to_stderr_ = true, bar_ = false;
    std::FILE* file_ = nullptr;
    std::vector<std::string> early_;  // timestamped lines before open_file
    std::string bar_text_;  // drawn now, "" for none
};

// The process's console (the trainer runs once per process).
Console& console();

}  // namespace llmt::train
