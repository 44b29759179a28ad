// RunsIndex: scan the roots' entries (stats only), keep the runs sorted by key; see runs_index.h.
#include "server/runs/runs_index.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "core/error.h"

namespace llmt::server {

namespace fs = std::filesystem;

namespace {

// `p` is `dir` or lies under it (both canonical).
bool inside(const fs::path& p, const fs::path& dir) {
    const std::string d = dir.string(), s = p.string();
    return s.size() > d.size() && s.compare(0, d.size(), d) == 0 && (d.back() == '/' || s[d.size()] == '/');
}

// The files whose presence makes a directory a run (any one of them: a run just started has only
// config.yaml and meta.json; one whose metadata was lost still has its metrics).
bool looks_like_run(const fs::path& dir) {
    std::error_code ec;
    for (const char* f : {"meta.json", "config.yaml", "metrics.jsonl"})
        if (fs::is_regular_file(dir / f, ec)) return true;
    return false;
}

bool less_key(const IndexedRun& a, const IndexedRun& b) {
    return a.root != b.root ? a.root < b.root : a.name < b.name;
}

}  // namespace

bool valid_run_name(std::string_view name) {
    if (name.empty() || name.size() > 200 || name.front() == '.') return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
               c == '-';
    });
}

std::string IndexedRun::key() const {
    return fmt::format("{}/{}", root, name);
}

RunsIndex::RunsIndex(const std::vector<fs::path>& roots, std::chrono::milliseconds rescan_every,
                     const std::string& flag)
    : rescan_every_(rescan_every) {
    for (const auto& r : roots) {
        std::error_code ec;
        fs::path c = fs::canonical(r, ec);
        if (ec) throw UsageError(fmt::format("{} {}: {}", flag, r.string(), ec.message()));
        if (!fs::is_directory(c, ec))
            throw UsageError(
                fmt::format("{} {}: not a directory (expected a folder of run directories)", flag, r.string()));
        roots_.push_back(c);
    }
    snapshot_ = scan();
}

std::shared_ptr<const RunsIndex::Snapshot> RunsIndex::scan() const {
    auto snap = std::make_shared<Snapshot>();
    snap->taken = std::chrono::steady_clock::now();
    size_t entries = 0;
    for (size_t r = 0; r < roots_.size(); ++r) {
        std::error_code ec;
        for (auto it = fs::directory_iterator(roots_[r], ec); !ec && it != fs::directory_iterator();
             it.increment(ec)) {
            if (++entries > kMaxEntriesPerScan || snap->runs.size() >= kMaxRuns) {
                snap->truncated = true;
                break;
            }
            const std::string name = it->path().filename().string();
            std::error_code entry_ec;  // a failure on one entry skips it, not the rest of the root
            // A symlinked entry is skipped outright: what it points at is not the root's to show.
            if (!valid_run_name(name) || it->is_symlink(entry_ec) || !it->is_directory(entry_ec)) continue;
            fs::path dir = fs::canonical(it->path(), entry_ec);
            if (entry_ec || !inside(dir, roots_[r]) || !looks_like_run(dir)) continue;
            snap->runs.push_back({r, name, dir});
        }
    }
    std::sort(snap->runs.begin(), snap->runs.end(), less_key);
    return snap;
}

std::shared_ptr<const RunsIndex::Snapshot> RunsIndex::current() const {
    std::lock_guard lock(mu_);
    return snapshot_;
}

void RunsIndex::rescan() {
    std::lock_guard scanning(scan_mu_);
    auto snap = scan();
    std::lock_guard lock(mu_);
    snapshot_ = std::move(snap);
}

void RunsIndex::refresh() {
    if (std::chrono::steady_clock::now() - current()->taken < rescan_every_) return;
    std::unique_lock scanning(scan_mu_, std::try_to_lock);
    if (!scanning.owns_lock()) return;  // another request is scanning: serve the previous snapshot
    auto snap = scan();
    std::lock_guard lock(mu_);
    snapshot_ = std::move(snap);
}

RunsIndex::Page RunsIndex::list(const std::string& after, size_t limit) const {
    auto snap = current();
    Page page;
    page.total = snap->runs.size();
    page.truncated = snap->truncated;
    auto it = snap->runs.begin();
    if (!after.empty()) {
        // The cursor is a key "<root>/<name>"; a malformed one sorts before everything.
        IndexedRun probe;
        const size_t slash = after.find('/');
        size_t root = 0;
        if (slash != std::string::npos &&
            std::from_chars(after.data(), after.data() + slash, root).ptr == after.data() + slash) {
            probe.root = root;
            probe.name = after.substr(slash + 1);
            it = std::upper_bound(snap->runs.begin(), snap->runs.end(), probe, less_key);
        }
    }
    for (; it != snap->runs.end() && page.runs.size() < limit; ++it) page.runs.push_back(*it);
    if (it != snap->runs.end() && !page.runs.empty()) page.next_after = page.runs.back().key();
    return page;
}

std::optional<IndexedRun> RunsIndex::find(size_t root, std::string_view name) const {
    auto snap = current();
    IndexedRun probe{root, std::string(name), {}};
    auto it = std::lower_bound(snap->runs.begin(), snap->runs.end(), probe, less_key);
    if (it == snap->runs.end() || it->root != root || it->name != name) return std::nullopt;
    return *it;
}

std::optional<fs::path> RunsIndex::file(const IndexedRun& run, std::string_view rel) {
    std::error_code ec;
    fs::path full = fs::canonical(run.dir / rel, ec);
    if (ec || !inside(full, run.dir) || !fs::is_regular_file(full, ec)) return std::nullopt;
    return full;
}

std::vector<int> RunsIndex::log_ranks(const IndexedRun& run) {
    std::vector<int> ranks;
    std::error_code ec;
    size_t seen = 0;
    for (auto it = fs::directory_iterator(run.dir / "logs", ec); !ec && it != fs::directory_iterator() && seen < 1024;
         it.increment(ec), ++seen) {
        const std::string n = it->path().filename().string();
        if (n.size() < 9 || n.compare(0, 4, "rank") != 0 || n.compare(n.size() - 4, 4, ".log") != 0) continue;
        int k = -1;
        auto [end, err] = std::from_chars(n.data() + 4, n.data() + n.size() - 4, k);
        if (err != std::errc() || end != n.data() + n.size() - 4 || k < 0 || k > 1023) continue;
        if (file(run, fmt::format("logs/rank{}.log", k))) ranks.push_back(k);
    }
    std::sort(ranks.begin(), ranks.end());
    return ranks;
}

}  // namespace llmt::server
