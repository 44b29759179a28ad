#include "core/fs.h"

#include <fcntl.h>
#include <glob.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/regular_file.h"
#include "core/unique_fd.h"
#include "core/write_into_place.h"

namespace llmt {
namespace {

[[noreturn]] void throw_io(const std::string& what, const std::filesystem::path& path, int err) {
    throw IoError(fmt::format("{} '{}': {}", what, path.string(), std::strerror(err)));
}

}  // namespace

std::string read_file(const std::filesystem::path& path, std::size_t max_bytes) {
    const RegularFile file = open_regular_file(path, "");
    const UniqueFd& fd = file.fd;
    if (file.size > max_bytes) {
        throw InputError(fmt::format("'{}' is {} bytes; files of this kind are limited to {} bytes",
                                     path.string(), file.size, max_bytes));
    }
    std::string out;
    char buf[1 << 16];
    for (;;) {
        ssize_t n = ::read(fd.get(), buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR) continue;
            throw_io("cannot read", path, errno);
        }
        if (n == 0) break;
        out.append(buf, static_cast<std::size_t>(n));
        if (out.size() > max_bytes) {
            throw InputError(fmt::format("'{}' is larger than the limit of {} bytes for files of this kind",
                                         path.string(), max_bytes));
        }
    }
    return out;
}

void fsync_path(const std::filesystem::path& path) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) throw_io("cannot open for fsync", path, errno);
    if (::fsync(fd.get()) != 0) throw_io("cannot fsync", path, errno);
}

void write_file_atomic(const std::filesystem::path& path, std::string_view data) {
    WriteIntoPlace out(path);
    out.write(data.data(), data.size());
    out.commit();
}

std::vector<std::string> expand_glob(const std::string& pattern) {
    glob_t g{};
    int rc = ::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &g);
    std::vector<std::string> out;
    if (rc == 0) {
        for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
    }
    ::globfree(&g);
    if (rc != 0 && rc != GLOB_NOMATCH)
        throw InputError(fmt::format("cannot expand the pattern '{}' (glob error {})", pattern, rc));
    std::sort(out.begin(), out.end());
    return out;
}

void make_dirs(const std::filesystem::path& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw IoError(fmt::format("cannot create directory '{}': {}", dir.string(), ec.message()));
}

}  // namespace llmt
