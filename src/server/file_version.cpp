#include "server/file_version.h"

#include <sys/stat.h>

namespace llmt::server {

std::optional<FileVersion> file_version(const std::filesystem::path& path) {
    struct stat st{};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
    FileVersion v;
    v.dev = static_cast<uint64_t>(st.st_dev);
    v.ino = static_cast<uint64_t>(st.st_ino);
    v.size = static_cast<uint64_t>(st.st_size);
    v.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    v.ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
    return v;
}

}  // namespace llmt::server
