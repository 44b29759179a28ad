// WriteIntoPlace: decide from lstat(2) whether to rename into place or write through; see
// write_into_place.h.
#include "core/write_into_place.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/fs.h"
#include "core/regular_file.h"

namespace llmt {

namespace {

[[noreturn]] void throw_io(const std::string& what, const std::filesystem::path& path, int err) {
    throw IoError(fmt::format("{} '{}': {}", what, path.string(), std::strerror(err)));
}

[[noreturn]] void refuse(const std::filesystem::path& path, unsigned mode, bool via_link) {
    throw InputError(fmt::format("'{}' is {}{}, expected a regular file (replaced) or a character device, FIFO or "
                                 "symbolic link to write through",
                                 path.string(), via_link ? "a symbolic link to " : "", file_type_name(mode)));
}

// True when `path` is to be written through; throws for what is refused.
bool writes_through(const std::filesystem::path& path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) {
        if (errno == ENOENT) return false;
        throw_io("cannot stat", path, errno);
    }
    if (S_ISREG(st.st_mode)) return false;
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) return true;
    if (!S_ISLNK(st.st_mode)) refuse(path, st.st_mode, false);
    // A link (/dev/stdout): what it leads to decides; a dangling one is created, as `>` would.
    if (::stat(path.c_str(), &st) != 0) {
        if (errno == ENOENT) return true;
        throw_io("cannot stat", path, errno);
    }
    if (!S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode)) refuse(path, st.st_mode, true);
    return true;
}

}  // namespace

WriteIntoPlace::WriteIntoPlace(std::filesystem::path path) : path_(std::move(path)), fd_(-1) {
    through_ = writes_through(path_);
    if (through_) {
        writing_ = path_;
        fd_ = UniqueFd(::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0644));
        if (fd_.get() < 0) throw_io("cannot open for writing", path_, errno);
        return;
    }
    writing_ = path_;
    writing_ += fmt::format(".tmp.{}", ::getpid());
    fd_ = UniqueFd(::open(writing_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
    if (fd_.get() < 0) throw_io("cannot create", writing_, errno);
}

WriteIntoPlace::~WriteIntoPlace() {
    if (!through_ && !committed_) ::unlink(writing_.c_str());
}

void WriteIntoPlace::write(const void* data, std::size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
        ssize_t w = ::write(fd_.get(), p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            throw_io("cannot write", writing_, errno);
        }
        p += w;
        n -= static_cast<std::size_t>(w);
    }
}

void WriteIntoPlace::commit() {
    if (through_) {
        struct stat st {};
        if (::fstat(fd_.get(), &st) == 0 && S_ISREG(st.st_mode) && ::fsync(fd_.get()) != 0)
            throw_io("cannot fsync", writing_, errno);
        fd_ = UniqueFd(-1);
        committed_ = true;
        return;
    }
    if (::fsync(fd_.get()) != 0) throw_io("cannot fsync", writing_, errno);
    fd_ = UniqueFd(-1);
    if (::rename(writing_.c_str(), path_.c_str()) != 0) throw_io("cannot rename into place", path_, errno);
    committed_ = true;
    auto dir = path_.parent_path();
    fsync_path(dir.empty() ? std::filesystem::path(".") : dir);
}

}  // namespace llmt
