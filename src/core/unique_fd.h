// UniqueFd: owns a POSIX file descriptor and closes it when it goes out of scope (-1 = none).
#pragma once

#include <unistd.h>

#include <utility>

namespace llmt {

class UniqueFd {
public:
    explicit UniqueFd(int fd) : fd_(fd) {}
    ~UniqueFd() {
        if (fd_ >= 0) ::close(fd_);
    }
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd& operator=(const UniqueFd&) = delete;
    UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
    UniqueFd& operator=(UniqueFd&& o) noexcept {
        if (this != &o) {
            if (fd_ >= 0) ::close(fd_);
            fd_ = std::exchange(o.fd_, -1);
        }
        return *this;
    }
    int get() const { return fd_; }
    // Gives up ownership: the caller closes the returned descriptor.
    int release() { return std::exchange(fd_, -1); }

private:
    int fd_;
};

}  // namespace llmt
