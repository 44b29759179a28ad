// The Hugging Face hub cache layout (what `huggingface-cli download` and `from_pretrained` leave in
// ~/.cache/huggingface/hub): a repository folder `models--ORG--NAME` or `datasets--ORG--NAME` holding
// refs/<revision> (a commit hash), snapshots/<hash>/ (the files, as symlinks into blobs/) and blobs/.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace llmt {

// True when `dir` looks like a hub cache repository folder (it has a snapshots/ directory).
bool is_hub_cache_repo(const std::filesystem::path& dir);

// The snapshot directory of a hub cache repository folder for `revision` ("main" by default): the
// commit hash in refs/<revision>, or `revision` itself when it names a snapshot; with no refs/ file
// and a single snapshot, that one. Returns nullopt when `dir` is not a repository folder. Throws
// InputError naming the folder, the revision and the snapshots present when it cannot be resolved.
std::optional<std::filesystem::path> resolve_hub_snapshot(const std::filesystem::path& dir, const std::string& revision = "main");

// `path` itself, or its snapshot when it is a hub cache repository folder (resolve_hub_snapshot).
std::filesystem::path resolve_hub_path(const std::filesystem::path& path, const std::string& revision = "main");

}  // namespace llmt
