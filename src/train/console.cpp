#include "train/console.h"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <sstream>

#include "core/error.h"
#include "core/time.h"

namespace llmt::train {

namespace {

constexpr const char* kClearLine = "\r\033[K";

}  // namespace

std::string short_duration(double s) {
    if (!std::isfinite(s) || s < 0) return "?";
    const auto t = static_cast<int64_t>(std::llround(s));
    if (t < 60) return fmt::format("{}s", t);
    if (t < 3600) return fmt::format("{}m{:02}s", t / 60, t % 60);
    return fmt::format("{}h{:02}m", t / 3600, (t % 3600) / 60);
}

std::string progress_text(const Progress& p, int width) {
    const double frac = p.max_steps > 0 ? std::clamp(static_cast<double>(p.step) / p.max_steps, 0.0, 1.0) : 0.0;
    const int filled = static_cast<int>(frac * width);
    const std::string bar =
        std::string(static_cast<size_t>(filled), '#') + std::string(static_cast<size_t>(width - filled), '-');
    const double eta = p.seconds_per_step * static_cast<double>(p.max_steps - p.step);
    return fmt::format("[{}] {}/{} {:>3.0f}% | loss {:.4f} | {:.2f} s/step | eta {}", bar, p.step, p.max_steps,
                       100 * frac, p.loss, p.seconds_per_step, short_duration(eta));
}

Console::~Console() {
    if (file_) std::fclose(file_);
}

void Console::open_file(const std::filesystem::path& logs_dir, int rank) {
    if (file_) std::fclose(file_);
    std::error_code ec;
    std::filesystem::create_directories(logs_dir, ec);
    const auto path = logs_dir / fmt::format("rank{}.log", rank);
    file_ = std::fopen(path.c_str(), "a");
    if (!file_) throw IoError(fmt::format("cannot open '{}' for appending: {}", path.string(), std::strerror(errno)));
    for (const std::string& l : early_) fmt::print(file_, "{}\n", l);
    early_.clear();
    std::fflush(file_);
}

void Console::close_file() {
    if (file_) std::fclose(file_);
    file_ = nullptr;
    early_.clear();
}

void Console::enable_progress(bool on) { bar_ = on && to_stderr_ && ::isatty(2) == 1; }

void Console::line(const std::string& s) {
    std::istringstream in(s);
    std::string one;
    if (bar_ && to_stderr_) clear_bar();
    while (std::getline(in, one)) {
        if (one.empty()) continue;
        if (to_stderr_) fmt::print(stderr, "{}\n", one);
        if (file_) fmt::print(file_, "{} {}\n", utc_iso8601_now(), one);
        else if (early_.size() < kMaxEarlyLines) early_.push_back(utc_iso8601_now() + " " + one);
    }
    if (file_) std::fflush(file_);
    if (bar_ && to_stderr_) draw_bar();
}

void Console::progress(const Progress& p) {
    if (!bar_) return;
    bar_text_ = progress_text(p);
    clear_bar();
    draw_bar();
}

void Console::end_progress() {
    if (!bar_ || bar_text_.empty()) return;
    fmt::print(stderr, "{}{}\n", kClearLine, bar_text_);
    bar_text_.clear();
    bar_ = false;
}

void Console::clear_bar() { fmt::print(stderr, "{}", kClearLine); }

void Console::draw_bar() {
    // Wider than the terminal it would wrap, and "\r" would go back to the wrapped half only.
    winsize ws{};
    const size_t cols = ::ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 ? ws.ws_col - 1 : 79;
    if (!bar_text_.empty()) fmt::print(stderr, "{}", bar_text_.substr(0, cols));
    std::fflush(stderr);
}

Console& console() {
    static Console c;
    return c;
}

}  // namespace llmt::train
