// Writing a file into place, the one way every writer does it: a path that names nothing or a
// regular file gets a temporary file beside it, fsynced and renamed over it, so readers see the old
// file or the new one and never a part. A path that names a character device, a FIFO or a symbolic
// link (/dev/null, /dev/stdout, a pipe) is written through, as a shell's `>` would, and never renamed
// over; a directory, block device or socket is refused. docs/security.md "Files the program writes".
#pragma once

#include <cstddef>
#include <filesystem>

#include "core/unique_fd.h"

namespace llmt {

// Not thread-safe; one object per file being written. Not safe against two writers of one path.
class WriteIntoPlace {
public:
    // Opens the temporary file (`<path>.tmp.<pid>`, mode 0644) or the target itself. Throws
    // InputError "'<path>' is a directory, expected a regular file or a character device, FIFO or
    // symbolic link to write through" for what it refuses, IoError (path + errno text) when it cannot
    // open. Opening a FIFO waits for its reader, as a shell redirection does.
    explicit WriteIntoPlace(std::filesystem::path path);
    // Without commit(), removes the temporary file (the target is untouched).
    ~WriteIntoPlace();
    WriteIntoPlace(const WriteIntoPlace&) = delete;
    WriteIntoPlace& operator=(const WriteIntoPlace&) = delete;

    int fd() const { return fd_.get(); }
    // The file the bytes go to now (the temporary one, or the target when written through).
    const std::filesystem::path& writing() const { return writing_; }
    bool through() const { return through_; }

    // Writes all of `data`. Throws IoError.
    void write(const void* data, std::size_t n);
    // Makes the bytes durable and visible at the path: fsync, rename and fsync of the directory; for a
    // target written through, an fsync where the target is a regular file. Throws IoError.
    void commit();

private:
    std::filesystem::path path_, writing_;
    UniqueFd fd_;
    bool through_ = false, committed_ = false;
};

}  // namespace llmt
