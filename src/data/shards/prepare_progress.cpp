// Progress (prepare_progress.h): a carriage-return bar for terminals, periodic lines otherwise.
#include "data/shards/prepare_progress.h"

#include <fmt/format.h>

#include <algorithm>

namespace llmt::data {

Progress::Progress(std::string label, uint64_t total_bytes, bool tty, std::FILE* out)
    : label_(std::move(label)),
      total_(total_bytes),
      tty_(tty),
      out_(out),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

std::string Progress::line(uint64_t done, double secs) const {
    const double mb = static_cast<double>(done) / 1e6;
    const double rate = secs > 0 ? mb / secs : 0.0;
    std::string s;
    if (total_ > 0) {
        const double frac = std::min(1.0, static_cast<double>(done) / static_cast<double>(total_));
        if (tty_) {
            constexpr int kWidth = 30;
            const int fill = static_cast<int>(frac * kWidth);
            s += "[" + std::string(static_cast<std::size_t>(fill), '#') +
                 std::string(static_cast<std::size_t>(kWidth - fill), '.') + "] ";
        }
        s += fmt::format("{:5.1f}% {:.1f}/{:.1f} MB {:.1f} MB/s", 100.0 * frac, mb, static_cast<double>(total_) / 1e6,
                         rate);
        if (rate > 0 && done < total_) {
            const auto eta = static_cast<long>((static_cast<double>(total_ - done) / 1e6) / rate + 0.5);
            s += fmt::format(" ETA {}:{:02d}", eta / 60, eta % 60);
        }
    } else {
        s += fmt::format("{:.1f} MB {:.1f} MB/s", mb, rate);
    }
    return s;
}

void Progress::update(uint64_t done_bytes) {
    if (!out_) return;
    const auto now = std::chrono::steady_clock::now();
    const double since_last = std::chrono::duration<double>(now - last_).count();
    if (since_last < (tty_ ? 0.1 : 5.0)) return;
    last_ = now;
    const double secs = std::chrono::duration<double>(now - start_).count();
    if (tty_) {
        fmt::print(out_, "\r{}: {}\x1b[K", label_, line(done_bytes, secs));
    } else {
        fmt::print(out_, "{}: {}\n", label_, line(done_bytes, secs));
    }
    std::fflush(out_);
}

void Progress::finish(const std::string& extra) {
    if (!out_) return;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double mb = static_cast<double>(total_) / 1e6;
    fmt::print(out_, "{}{}: done, {:.1f} MB in {:.1f} s ({:.1f} MB/s){}{}\n", tty_ ? "\r\x1b[K" : "", label_, mb, secs,
               secs > 0 ? mb / secs : 0.0, extra.empty() ? "" : ", ", extra);
    std::fflush(out_);
}

}  // namespace llmt::data
