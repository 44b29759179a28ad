// Opening a file that must be a regular file (configs, shards, safetensors, state.json, tokenizer and
// tokens files, corpus inputs): a FIFO, device, socket or directory is refused at once with a message
// naming the path and its type, instead of blocking in open(2) or read(2) forever.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string_view>

#include "core/unique_fd.h"

namespace llmt {

struct RegularFile {
    UniqueFd fd;             // blocking, O_RDONLY | O_CLOEXEC
    std::uint64_t size = 0;  // st_size at open
};

// Opens `path` with O_NONBLOCK (so opening a FIFO without a writer returns at once), fstats the
// descriptor, refuses anything but a regular file, then clears O_NONBLOCK. `what` names the role in
// messages ("config file", "shard"; empty: none). Throws InputError "'<path>' is a FIFO (named pipe), expected a
// regular file (<what>)" for special files and directories, IoError (path + errno text) when it
// cannot be opened. Thread-safe.
RegularFile open_regular_file(const std::filesystem::path& path, std::string_view what);

// "a FIFO (named pipe)", "a directory", "a character device", ... for a st_mode.
std::string_view file_type_name(unsigned mode);

}  // namespace llmt
