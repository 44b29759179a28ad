// MetricsIndex: index new bytes with a light scan for "step", parse only the lines a poll returns;
// see metrics_index.h.
#include "server/runs/metrics_index.h"

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

void MetricsIndex::add_line(Entry& e, uint64_t offset, uint64_t end, int64_t step) {
    if (!e.blocks.empty() && e.blocks.back().lines < e.stride) {
        Block& b = e.blocks.back();
        b.end = end;
        b.max_step = std::max(b.max_step, step);
        ++b.lines;
        return;
    }
    e.blocks.push_back({offset, end, step, 1});
    if (e.blocks.size() <= kMaxBlocksPerFile) return;
    // Neighbours merge: half the blocks, twice the lines each; the steps' maxima stay exact.
    size_t out = 0;
    for (size_t i = 0; i < e.blocks.size(); i += 2, ++out) {
        Block merged = e.blocks[i];
        if (i + 1 < e.blocks.size()) {
            merged.end = e.blocks[i + 1].end;
            merged.max_step = std::max(merged.max_step, e.blocks[i + 1].max_step);
            merged.lines += e.blocks[i + 1].lines;
        }
        e.blocks[out] = merged;
    }
    e.blocks.resize(out);
    e.stride *= 2;
}

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
            if (auto step = step_of(std::string_view(chunk.data() + start, end - start)))
                add_line(e, e.indexed + start, e.indexed + end, *step);
            start = end + 1;
        }
        e.indexed += last_newline + 1;
        if (chunk.size() < kReadChunk) return;
    }
}

namespace {

// Appends to `out` the lines of `range` (text of whole lines separated by newlines) whose step is past
// since_step, up to the answer's bounds; false once a bound stopped it.
bool take_lines(std::string_view range, int64_t since_step, MetricsIndex::Since& out, size_t& bytes) {
    size_t start = 0;
    while (start < range.size()) {
        size_t end = range.find('\n', start);
        if (end == std::string_view::npos) end = range.size();
        const std::string_view line = range.substr(start, end - start);
        start = end + 1;
        const auto step = step_of(line);
        if (!step || *step <= since_step) continue;
        auto parsed = try_parse_json(line);
        if (!parsed || !parsed->is_object() || !parsed->contains("step") || !(*parsed)["step"].is_number_integer())
            continue;
        const int64_t s = (*parsed)["step"];
        if (s <= since_step) continue;
        if (out.points.size() >= MetricsIndex::kMaxPoints || bytes + line.size() > MetricsIndex::kMaxAnswerBytes) {
            out.truncated = true;
            return false;
        }
        bytes += line.size();
        out.last_step = std::max(out.last_step, s);
        out.points.push_back(std::move(*parsed));
    }
    return true;
}

}  // namespace

MetricsIndex::Since MetricsIndex::since(const fs::path& file, int64_t since_step) {
    Since out;
    out.last_step = since_step;
    const auto version = file_version(file);
    std::vector<Block> wanted;
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
                auto oldest = std::min_element(files_.begin(), files_.end(), [](const auto& a, const auto& b) {
                    return a.second.used < b.second.used;
                });
                files_.erase(oldest);
            }
            it = files_.emplace(file, Entry{}).first;
        }
        Entry& e = it->second;
        e.version = *version;
        e.used = ++clock_;
        extend(file, e);
        for (const Block& b : e.blocks)
            if (b.max_step > since_step) wanted.push_back(b);
    }
    if (wanted.empty()) return out;
    // The blocks that hold a wanted line, read as runs of neighbouring blocks, a chunk at a time.
    UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (fd.get() < 0) return out;
    size_t bytes = 0;
    for (size_t i = 0; i < wanted.size();) {
        size_t j = i + 1;
        uint64_t end = wanted[i].end;
        while (j < wanted.size() && wanted[j].offset <= end + 1) end = wanted[j++].end;
        // [pos, end) is whole lines; each read stops at its last newline. A line longer than a chunk
        // is not a metrics line: it is stepped over up to its newline.
        bool skipping = false;
        for (uint64_t pos = wanted[i].offset; pos < end;) {
            const std::string piece =
                read_at(fd.get(), pos, static_cast<size_t>(std::min<uint64_t>(kReadChunk, end - pos)));
            if (piece.empty()) return out;  // the file shrank under us: the next poll indexes it again
            if (skipping) {
                const size_t nl = piece.find('\n');
                pos += nl == std::string::npos ? piece.size() : nl + 1;
                skipping = nl == std::string::npos;
                continue;
            }
            size_t keep = piece.size();
            if (pos + piece.size() < end) {
                const size_t nl = piece.rfind('\n');
                if (nl == std::string::npos) {
                    skipping = true;
                    pos += piece.size();
                    continue;
                }
                keep = nl + 1;
            }
            if (!take_lines(std::string_view(piece).substr(0, keep), since_step, out, bytes)) return out;
            pos += keep;
        }
        i = j;
    }
    return out;
}

}  // namespace llmt::server
