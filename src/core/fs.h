// File helpers that never leave a half-written file: write to a temp name, fsync, rename, fsync the dir.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace llmt {

// Reads a whole file. Throws IoError (path + errno text) when it cannot be read, and InputError when
// it is larger than max_bytes (so a 10 GB file given as a config is refused before it is read).
std::string read_file(const std::filesystem::path& path, std::size_t max_bytes = SIZE_MAX);

// Writes `data` to `path` atomically (temp, fsync, rename, fsync the dir); a device, FIFO or symlink is
// written through and a directory refused (InputError): core/write_into_place.h. Readers see the old or
// the new file, never a partial one. Throws IoError. Not safe against two writers of one path at once.
void write_file_atomic(const std::filesystem::path& path, std::string_view data);

// fsync a file or a directory by path. Throws IoError.
void fsync_path(const std::filesystem::path& path);

// Paths matching a shell glob (glob(3)), sorted. An empty result is not an error here; callers
// decide. Throws InputError for a malformed pattern.
std::vector<std::string> expand_glob(const std::string& pattern);

// Creates `dir` and its parents with the given mode (default 0755). Throws IoError.
void make_dirs(const std::filesystem::path& dir);

}  // namespace llmt
