// The Hugging Face hub cache layout (what `huggingface-cli download` and `from_pretrained` leave in
// ~/.cache/huggingface/hub): a repository folder `models--ORG--NAME` or `datasets--ORG--NAME` holding
// refs/<revision> (a commit hash), snapshots/<hash>/ (the files, as symlinks into blobs/) and blobs/.
// A snapshot's links are followed only while they stay inside their repository folder.
// docs/data.md "Hugging Face datasets", docs/formats/hf_directories.md.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace llmt {

// True when `dir` looks like a hub cache repository folder (it has a snapshots/ directory).
bool is_hub_cache_repo(const std::filesystem::path& dir);

// The repository folder `path` is in: `path` itself when it is one, or the folder whose
// snapshots/<hash>/ holds `path` (looked up by name, without following links). nullopt otherwise.
std::optional<std::filesystem::path> hub_cache_repo_of(const std::filesystem::path& path);

// Throws InputError naming the link, where it leads and `repo` when a symbolic link at `path` or below
// it leads outside `repo` (every link resolved; links to directories inside `repo` are walked too).
void check_hub_links(const std::filesystem::path& repo, const std::filesystem::path& path);

// The snapshot directory of a hub cache repository folder for `revision` ("main" by default): the
// commit hash in refs/<revision>, or `revision` itself when it names a snapshot; with no refs/ and a
// single snapshot, that one. Its links are checked (check_hub_links). Returns nullopt when `dir` is not
// a repository folder. Throws InputError naming the folder, the revision and the revisions found (refs
// and snapshots) when it cannot be resolved.
std::optional<std::filesystem::path> resolve_hub_snapshot(const std::filesystem::path& dir,
                                                          const std::string& revision = "main");

// Where `path` leads at `revision`: a repository folder's snapshot (resolve_hub_snapshot); a snapshot
// directory of one, or a file in it, itself (links checked; a `revision` other than "main" must name
// that snapshot); any other path, itself. `in_cache`, when given, is set to whether `path` is in a hub
// cache. Throws InputError as resolve_hub_snapshot, and when `revision` names another snapshot.
std::filesystem::path resolve_hub_path(const std::filesystem::path& path, const std::string& revision = "main",
                                       bool* in_cache = nullptr);

// A revision is only for hub cache folders: throws InputError "`key` 'R' selects a snapshot of a hub cache
// folder ..., and `inputs` names no such folder" when `revision` is not "main" and `used` is false (no input was
// in a hub cache), so a revision is never accepted and ignored.
void check_revision_used(const std::string& revision, bool used, std::string_view key, std::string_view inputs);

}  // namespace llmt
