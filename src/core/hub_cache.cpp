// resolve_hub_snapshot (hub_cache.h): refs/<revision> holds a 40-hex commit hash naming
// snapshots/<hash>; the files below it are symlinks into blobs/, which are followed after checking
// that they stay inside the repository folder.
#include "core/hub_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <vector>

#include "core/check.h"
#include "core/error.h"

namespace llmt {

namespace fs = std::filesystem;

namespace {

bool is_hash(const std::string& s) {
    return !s.empty() && s.size() <= 64 &&
           std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// `p` is `root` or inside it (both canonical).
bool within(const fs::path& p, const fs::path& root) {
    const auto rel = p.lexically_relative(root);
    return !rel.empty() && *rel.begin() != "..";
}

// A path without a trailing separator (its last component is its name).
fs::path without_trailing_slash(const fs::path& p) {
    return !p.has_filename() && p.has_parent_path() ? p.parent_path() : p;
}

std::vector<std::string> list_snapshots(const fs::path& dir) {
    std::error_code ec;
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir / "snapshots", ec))
        if (e.is_directory(ec)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
}

// The branch and tag names under refs/ ("main", "pr/1").
std::vector<std::string> list_refs(const fs::path& dir) {
    std::error_code ec;
    std::vector<std::string> out;
    fs::recursive_directory_iterator it(dir / "refs", ec), end;
    for (; !ec && it != end; it.increment(ec))
        if (it->is_regular_file(ec)) out.push_back(it->path().lexically_relative(dir / "refs").generic_string());
    std::sort(out.begin(), out.end());
    return out;
}

std::string revisions_text(const fs::path& dir) {
    const auto refs = list_refs(dir), snaps = list_snapshots(dir);
    return fmt::format("refs: {}; snapshots: {}", refs.empty() ? "none" : fmt::format("{}", fmt::join(refs, ", ")),
                       snaps.empty() ? "none" : fmt::format("{}", fmt::join(snaps, ", ")));
}

}  // namespace

bool is_hub_cache_repo(const fs::path& dir) {
    if (dir.empty()) return false;
    std::error_code ec;
    return fs::is_directory(dir / "snapshots", ec) && !fs::exists(dir / "config.json", ec);
}

std::optional<fs::path> hub_cache_repo_of(const fs::path& path) {
    if (path.empty()) return std::nullopt;
    if (is_hub_cache_repo(path)) return path;
    std::error_code ec;
    fs::path p = without_trailing_slash(fs::absolute(path, ec).lexically_normal());
    if (ec) return std::nullopt;
    // p = REPO/snapshots/<hash>[/...]: find the component named "snapshots" below a repository folder.
    for (fs::path child = p, parent = p.parent_path(); parent != child;
         child = parent, parent = parent.parent_path()) {
        if (child.filename() != "snapshots" || child == p) continue;
        if (is_hub_cache_repo(parent)) return parent;
    }
    return std::nullopt;
}

void check_hub_links(const fs::path& repo, const fs::path& path) {
    std::error_code ec;
    const fs::path root = fs::canonical(repo, ec);
    LLMT_CHECK(!ec, "hub cache folder '{}' cannot be resolved: {}", repo.string(), ec.message());
    auto resolved = [&](const fs::path& link) {
        const fs::path real = fs::weakly_canonical(link, ec);
        LLMT_CHECK(!ec && within(real, root),
                   "'{}' links to '{}', outside the hub cache folder '{}' (a snapshot's files are links "
                   "into its blobs/)",
                   link.string(), ec ? ec.message() : real.string(), repo.string());
        return real;
    };
    std::vector<fs::path> dirs;
    std::set<fs::path> seen;
    const fs::path top = resolved(path);
    if (fs::is_directory(top, ec)) dirs.push_back(top);
    while (!dirs.empty()) {
        const fs::path dir = dirs.back();
        dirs.pop_back();
        if (!seen.insert(dir).second) continue;  // a link back to a directory already walked
        fs::directory_iterator it(dir, ec), end;
        LLMT_CHECK_AS(IoError, !ec, "cannot list directory '{}': {}", dir.string(), ec.message());
        for (; it != end; it.increment(ec)) {
            LLMT_CHECK_AS(IoError, !ec, "cannot list directory '{}': {}", dir.string(), ec.message());
            if (it->is_symlink(ec)) {
                const fs::path real = resolved(it->path());
                if (fs::is_directory(real, ec)) dirs.push_back(real);
            } else if (it->is_directory(ec)) {
                dirs.push_back(it->path());
            }
        }
    }
}

std::optional<fs::path> resolve_hub_snapshot(const fs::path& dir, const std::string& revision) {
    if (!is_hub_cache_repo(dir)) return std::nullopt;
    LLMT_CHECK(!revision.empty() && revision.find("..") == std::string::npos && revision[0] != '/',
               "hub cache revision '{}' must be a branch, tag or commit hash", revision);
    std::error_code ec;
    std::string hash;
    const fs::path ref = dir / "refs" / revision;
    const auto snaps = list_snapshots(dir);
    if (fs::is_regular_file(ref, ec)) {
        std::ifstream in(ref);
        std::getline(in, hash);
        while (!hash.empty() && (hash.back() == '\n' || hash.back() == '\r' || hash.back() == ' ')) hash.pop_back();
        LLMT_CHECK(is_hash(hash), "hub cache '{}': refs/{} holds '{}', expected a commit hash", dir.string(), revision,
                   hash.substr(0, 80));
    } else if (is_hash(revision) && fs::is_directory(dir / "snapshots" / revision, ec)) {
        hash = revision;
    } else if (revision == "main" && snaps.size() == 1 && !fs::exists(dir / "refs", ec)) {
        hash = snaps[0];
    } else {
        throw InputError(fmt::format(
            "hub cache '{}' has no revision '{}' (revisions found: {}) (hint: --revision, model.revision or "
            "data.revision: a branch or tag under refs/, or a snapshot's commit hash)",
            dir.string(), revision, revisions_text(dir)));
    }
    const fs::path snap = dir / "snapshots" / hash;
    LLMT_CHECK(fs::is_directory(snap, ec),
               "hub cache '{}': refs/{} names snapshot {}, which is not there (revisions found: {})", dir.string(),
               revision, hash, revisions_text(dir));
    check_hub_links(dir, snap);
    return snap;
}

fs::path resolve_hub_path(const fs::path& path, const std::string& revision, bool* in_cache) {
    if (in_cache) *in_cache = false;
    if (auto snap = resolve_hub_snapshot(path, revision)) {
        if (in_cache) *in_cache = true;
        return *snap;
    }
    const auto repo = hub_cache_repo_of(path);
    if (!repo) return path;
    if (in_cache) *in_cache = true;
    if (revision != "main") {  // a snapshot named directly: the revision given must be that snapshot
        const fs::path want = *resolve_hub_snapshot(*repo, revision);
        std::error_code ec;
        const fs::path given = fs::absolute(path, ec).lexically_normal();
        const auto rel = given.lexically_relative(fs::absolute(want, ec).lexically_normal());
        LLMT_CHECK(!rel.empty() && *rel.begin() != "..",
                   "'{}' is in another snapshot than revision '{}' of '{}' ({}) (hint: name the "
                   "repository folder with the revision, or the snapshot without one)",
                   path.string(), revision, repo->string(), want.filename().string());
    }
    check_hub_links(*repo, path);
    return path;
}

void check_revision_used(const std::string& revision, bool used, std::string_view key, std::string_view inputs) {
    LLMT_CHECK(used || revision == "main",
               "{} '{}' selects a snapshot of a hub cache folder (models--ORG--NAME or datasets--ORG--NAME), and {} "
               "names no such "
               "folder (hint: leave {} out, or name the cache folder)",
               key, revision, inputs, key);
}

}  // namespace llmt
