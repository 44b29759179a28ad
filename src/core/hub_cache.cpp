// resolve_hub_snapshot (hub_cache.h): refs/<revision> holds a 40-hex commit hash naming
// snapshots/<hash>; the files below it are symlinks into blobs/, which the file system follows.
#include "core/hub_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <vector>

#include "core/check.h"
#include "core/error.h"

namespace llmt {

namespace fs = std::filesystem;

namespace {
bool is_hash(const std::string& s) {
    return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}
}  // namespace

bool is_hub_cache_repo(const fs::path& dir) {
    std::error_code ec;
    return fs::is_directory(dir / "snapshots", ec) && !fs::exists(dir / "config.json", ec);
}

std::optional<fs::path> resolve_hub_snapshot(const fs::path& dir, const std::string& revision) {
    if (!is_hub_cache_repo(dir)) return std::nullopt;
    std::error_code ec;
    std::vector<std::string> snaps;
    for (const auto& e : fs::directory_iterator(dir / "snapshots", ec)) {
        if (e.is_directory()) snaps.push_back(e.path().filename().string());
    }
    std::sort(snaps.begin(), snaps.end());
    auto list = [&] {
        std::string s;
        for (const auto& x : snaps) s += (s.empty() ? "" : ", ") + x;
        return s.empty() ? std::string("none") : s;
    };
    LLMT_CHECK(!revision.empty() && revision.find("..") == std::string::npos && revision[0] != '/',
               "hub cache revision '{}' must be a branch, tag or commit hash", revision);
    std::string hash;
    const fs::path ref = dir / "refs" / revision;
    if (fs::is_regular_file(ref, ec)) {
        std::ifstream in(ref);
        std::getline(in, hash);
        while (!hash.empty() && (hash.back() == '\n' || hash.back() == '\r' || hash.back() == ' ')) hash.pop_back();
        LLMT_CHECK(is_hash(hash), "hub cache '{}': refs/{} holds '{}', expected a commit hash", dir.string(), revision, hash.substr(0, 80));
    } else if (is_hash(revision) && fs::is_directory(dir / "snapshots" / revision, ec)) {
        hash = revision;
    } else if (revision == "main" && snaps.size() == 1 && !fs::exists(dir / "refs", ec)) {
        hash = snaps[0];
    } else {
        throw InputError(fmt::format("hub cache '{}': no refs/{} and no snapshot named '{}' (snapshots: {}) (hint: --revision HASH)",
                                     dir.string(), revision, revision, list()));
    }
    const fs::path snap = dir / "snapshots" / hash;
    LLMT_CHECK(fs::is_directory(snap, ec), "hub cache '{}': refs/{} names snapshot {}, which is not there (snapshots: {})", dir.string(),
               revision, hash, list());
    return snap;
}

fs::path resolve_hub_path(const fs::path& path, const std::string& revision) {
    if (auto snap = resolve_hub_snapshot(path, revision)) return *snap;
    return path;
}

}  // namespace llmt
