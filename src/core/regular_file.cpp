// open_regular_file (regular_file.h): the descriptor is checked with fstat, never the path with stat,
// so the file cannot be swapped between the check and the read.
#include "core/regular_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "core/error.h"

namespace llmt {

std::string_view file_type_name(unsigned mode) {
    if (S_ISREG(mode)) return "a regular file";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "a special file";
}

RegularFile open_regular_file(const std::filesystem::path& path, std::string_view what) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
    const std::string role = what.empty() ? std::string() : std::string(what) + " ";
    if (fd.get() < 0) {
        const int err = errno;
        throw IoError(fmt::format("cannot open {}'{}': {}", role, path.string(), std::strerror(err)));
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) {
        const int err = errno;
        throw IoError(fmt::format("cannot stat {}'{}': {}", role, path.string(), std::strerror(err)));
    }
    if (!S_ISREG(st.st_mode)) {
        throw InputError(fmt::format("'{}' is {}, expected a regular file{}", path.string(),
                                     file_type_name(st.st_mode),
                                     what.empty() ? std::string() : fmt::format(" ({})", what)));
    }
    const int flags = ::fcntl(fd.get(), F_GETFL);
    if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) {
        const int err = errno;
        throw IoError(fmt::format("cannot set blocking mode on {}'{}': {}", role, path.string(), std::strerror(err)));
    }
    return RegularFile{std::move(fd), static_cast<std::uint64_t>(st.st_size)};
}

}  // namespace llmt
