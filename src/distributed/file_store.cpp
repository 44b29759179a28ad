// FileStore: flock'ed append-only record file (see file_store.h).
#include "distributed/file_store.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <thread>

#include "core/error.h"

namespace llmt::dist {
namespace {

using Records = std::map<std::string, std::string>;

// Runs fn(records, fd) under an exclusive lock of the file; fn may append with append_record.
void with_locked_file(const std::string& path, const std::function<void(Records&, int)>& fn) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) throw IoError(fmt::format("file store {}: open: {}", path, std::strerror(errno)));
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }  // closing releases the flock
    } closer{fd};
    while (::flock(fd, LOCK_EX) != 0) {
        if (errno != EINTR) throw IoError(fmt::format("file store {}: flock: {}", path, std::strerror(errno)));
    }
    std::string data;
    char buf[65536];
    for (;;) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw IoError(fmt::format("file store {}: read: {}", path, std::strerror(errno)));
        if (n == 0) break;
        data.append(buf, static_cast<size_t>(n));
    }
    Records records;
    size_t pos = 0;
    auto take = [&](std::string& out) {
        uint32_t len;
        if (data.size() - pos < 4) return false;
        std::memcpy(&len, data.data() + pos, 4);
        if (data.size() - pos - 4 < len) return false;
        out.assign(data, pos + 4, len);
        pos += 4 + len;
        return true;
    };
    while (pos < data.size()) {
        std::string k, v;
        if (!take(k) || !take(v)) {
            throw FormatError(fmt::format("file store {}: truncated record at offset {}", path, pos));
        }
        records[k] = std::move(v);
    }
    fn(records, fd);
}

void append_record(const std::string& path, int fd, const std::string& key, const std::string& value) {
    std::string rec;
    auto put = [&](const std::string& s) {
        uint32_t len = static_cast<uint32_t>(s.size());
        rec.append(reinterpret_cast<const char*>(&len), 4);
        rec += s;
    };
    put(key);
    put(value);
    // O_APPEND is not set: the read above left the offset at the end of the file, under the lock.
    size_t done = 0;
    while (done < rec.size()) {
        ssize_t n = ::write(fd, rec.data() + done, rec.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw IoError(fmt::format("file store {}: write: {}", path, std::strerror(errno)));
        done += static_cast<size_t>(n);
    }
}

}  // namespace

FileStore::FileStore(std::string path, std::chrono::milliseconds timeout)
    : path_(std::move(path)), timeout_(timeout) {
    with_locked_file(path_, [](Records&, int) {});
}

void FileStore::set(const std::string& key, const std::string& value) {
    with_locked_file(path_, [&](Records&, int fd) { append_record(path_, fd, key, value); });
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
    int64_t result = 0;
    with_locked_file(path_, [&](Records& r, int fd) {
        auto it = r.find(key);
        int64_t cur = 0;
        if (it != r.end()) {
            try {
                cur = std::stoll(it->second);
            } catch (const std::exception&) {
                throw DistError(fmt::format("file store {}: add to key '{}' whose value is not an integer",
                                            path_, key));
            }
        }
        result = cur + delta;
        append_record(path_, fd, key, std::to_string(result));
    });
    return result;
}

bool FileStore::check(const std::vector<std::string>& keys) {
    bool all = true;
    with_locked_file(path_, [&](Records& r, int) {
        for (const auto& k : keys) all = all && r.count(k) > 0;
    });
    return all;
}

void FileStore::wait(const std::vector<std::string>& keys) {
    auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (!check(keys)) {
        if (std::chrono::steady_clock::now() >= deadline) {
            std::string missing;
            with_locked_file(path_, [&](Records& r, int) {
                for (const auto& k : keys) {
                    if (!r.count(k)) missing += (missing.empty() ? "'" : ", '") + k + "'";
                }
            });
            throw DistTimeout(fmt::format("store {}: wait for key(s) {} timed out after {:.1f} s", describe(),
                                          missing, timeout_.count() / 1000.0));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

std::string FileStore::get(const std::string& key) {
    auto deadline = std::chrono::steady_clock::now() + timeout_;
    for (;;) {
        std::string value;
        bool found = false;
        with_locked_file(path_, [&](Records& r, int) {
            auto it = r.find(key);
            if (it != r.end()) {
                value = it->second;
                found = true;
            }
        });
        if (found) return value;
        if (std::chrono::steady_clock::now() >= deadline) {
            throw DistTimeout(fmt::format("store {}: get of key '{}' timed out after {:.1f} s", describe(), key,
                                          timeout_.count() / 1000.0));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

}  // namespace llmt::dist
