// MetricsIndex: index new bytes with a light scan for "step", parse only the lines a poll returns;
// see metrics_index.h.
#include "server/metrics_index.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <string>
#include <string_view>

#include "core/json_parse.h"
#include "core/unique_fd.h"

namespace llmt::server {

namespace fs = std::filesystem;

namespace {

constexpr size_t kReadChunk = 4u << 20;  // new bytes are read at most this much at a time

// The integer after the first "step" key of a JSON line, found without parsing the line (the full
// parse happens when the line is served); nullopt when there is none.
std::optional<int64_t> step_of(std::string_view line) {
    const size_t key = line.find("\"step\"");
    if (key == std::string_view::npos) return std::nullopt;
    size_t i = key + 6;
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i >= line.size() || line[i] != ':') return std::nullopt;
    ++i;
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    int64_t step = 0;
    auto [end, ec] = std::from_chars(line.data() + i, line.data() + line.size(), step);
    if (ec != std::errc() || end == line.data() + i) return std::nullopt;
    if (end < line.data() + line.size() && *end != ',' && *end != '}' && *end != ' ') return std::nullopt;
    return step;
}

// Bytes [from, from + n) of an open file; fewer at its end.
std::string read_at(int fd, uint64_t from, size_t n) {
    std::string out(n, '\0');
    size_t got = 0;
    while (got < n) {
        ssize_t r = ::pread(fd, out.data() + got, n - got, static_cast<off_t>(from + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += static_cast<size_t>(r);
    }
    out.resize(got);
    return out;
}

}  // namespace

void MetricsIndex::extend(const fs::path& file, Entry& e) {
    UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (fd.get() < 0) return;
    for (;;) {
        const std::string chunk = read_at(fd.get(), e.indexed, kReadChunk);
        const size_t last_newline = chunk.rfind('\n');
        if (last_newline == std::string::npos) {
            // A line longer than a chunk is not a metrics line: step over it once it ends.
            if (chunk.size() == kReadChunk) {
                e.indexed += chunk.size();
                continue;
            }
            return;
        }
        size_t start = 0;
        while (start <= last_newline) {
            const size_t end = chunk.find('\n', start);
            const std::string_view line(chunk.data() + start, end - start);
            if (auto step = step_of(line); step && line.size() <= UINT32_MAX)
                e.lines.push_back({*step, e.indexed + start, static_cast<uint32_t>(line.size())});
            start = end + 1;
        }
        e.indexed += last_newline + 1;
        if (chunk.size() < kReadChunk) return;
    }
}

MetricsIndex::Since MetricsIndex::since(const fs::path& file, int64_t since_step) {
    Since out;
    out.last_step = since_step;
    const auto version = file_version(file);
    std::vector<Line> wanted;
    {
        std::lock_guard lock(mu_);
        if (!version) {
            files_.erase(file);
            return out;
        }
        auto it = files_.find(file);
        if (it != files_.end()) {
            const FileVersion& was = it->second.version;
            if (was.dev != version->dev || was.ino != version->ino || version->size < it->second.indexed)
                it->second = Entry{};  // replaced or truncated: index it again
        } else {
            if (files_.size() >= kMaxFiles) {
                auto oldest = std::min_element(files_.begin(), files_.end(),
                                               [](const auto& a, const auto& b) { return a.second.used < b.second.used; });
                files_.erase(oldest);
            }
            it = files_.emplace(file, Entry{}).first;
        }
        Entry& e = it->second;
        e.version = *version;
        e.used = ++clock_;
        extend(file, e);
        for (const Line& l : e.lines)
            if (l.step > since_step) wanted.push_back(l);
    }
    if (wanted.empty()) return out;
    // The lines asked for, read as runs of neighbouring lines.
    UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (fd.get() < 0) return out;
    size_t i = 0;
    while (i < wanted.size()) {
        size_t j = i + 1;
        uint64_t end = wanted[i].offset + wanted[i].length;
        while (j < wanted.size() && wanted[j].offset <= end + 1 && wanted[j].offset + wanted[j].length - wanted[i].offset <= kReadChunk) {
            end = wanted[j].offset + wanted[j].length;
            ++j;
        }
        const std::string run = read_at(fd.get(), wanted[i].offset, static_cast<size_t>(end - wanted[i].offset));
        for (size_t k = i; k < j; ++k) {
            const uint64_t at = wanted[k].offset - wanted[i].offset;
            if (at + wanted[k].length > run.size()) break;
            auto parsed = try_parse_json(std::string_view(run).substr(at, wanted[k].length));
            if (!parsed || !parsed->is_object() || !parsed->contains("step") || !(*parsed)["step"].is_number_integer())
                continue;
            const int64_t step = (*parsed)["step"];
            if (step <= since_step) continue;
            out.last_step = std::max(out.last_step, step);
            out.points.push_back(std::move(*parsed));
        }
        i = j;
    }
    return out;
}

}  // namespace llmt::server
