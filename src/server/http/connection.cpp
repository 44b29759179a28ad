// Socket I/O with deadlines; see connection.h.
#include "server/http/connection.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "server/http/http_error.h"

namespace llmt::server::http {

namespace {

// Milliseconds left until `deadline`, at least 0, for poll().
int ms_until(Clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

}  // namespace

Connection::~Connection() {
    if (fd_ >= 0) ::close(fd_);
}

Connection::Read Connection::read_some(size_t max) {
    char chunk[16384];
    for (;;) {
        ssize_t n = ::recv(fd_, chunk, std::min(max, sizeof chunk), 0);
        if (n > 0) {
            buffer_.append(chunk, static_cast<size_t>(n));
            return Read::kData;
        }
        if (n == 0) return Read::kClosed;
        if (errno == EINTR) continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? Read::kWouldBlock : Read::kClosed;
    }
}

bool Connection::read_until(Clock::time_point deadline, const char* what) {
    for (;;) {
        Read r = read_some(64 << 10);
        if (r == Read::kData) return true;
        if (r == Read::kClosed) return false;
        ack_now();
        pollfd p{fd_, POLLIN, 0};
        int ready = ::poll(&p, 1, ms_until(deadline));
        if (ready < 0 && errno == EINTR) continue;
        if (ready == 0)
            throw HttpError(408, "request_timeout", std::string("the client did not send ") + what + " in time");
        if (ready < 0) return false;
    }
}

bool Connection::write_all(std::string_view data, std::chrono::milliseconds timeout) {
    while (!data.empty()) {
        ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
        if (n > 0) {
            data.remove_prefix(static_cast<size_t>(n));
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            pollfd p{fd_, POLLOUT, 0};
            int ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
            if (ready < 0 && errno == EINTR) continue;
            if (ready <= 0 || (p.revents & (POLLERR | POLLHUP))) return false;
            continue;
        }
        return false;
    }
    return true;
}

void Connection::queue_write(std::string data) {
    if (out_pos_ == out_.size()) {
        out_ = std::move(data);
        out_pos_ = 0;
    } else {
        out_ += data;
    }
}

Connection::Flush Connection::flush() {
    while (out_pos_ < out_.size()) {
        ssize_t n = ::send(fd_, out_.data() + out_pos_, out_.size() - out_pos_, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            out_pos_ += static_cast<size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Flush::kWouldBlock;
        return Flush::kFailed;
    }
    out_.clear();
    out_.shrink_to_fit();  // a connection at rest holds no answer's memory
    out_pos_ = 0;
    return Flush::kDone;
}

void Connection::write_now(std::string_view data) {
    while (!data.empty()) {
        ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        data.remove_prefix(static_cast<size_t>(n));
    }
}

bool Connection::is_writable() const {
    pollfd p{fd_, POLLOUT | POLLRDHUP, 0};
    if (::poll(&p, 1, 0) < 0) return false;
    return (p.revents & POLLOUT) && !(p.revents & (POLLERR | POLLHUP | POLLRDHUP));
}

void Connection::shutdown_write() { ::shutdown(fd_, SHUT_WR); }

void Connection::ack_now() {
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);  // best effort: a missed ACK only costs time
}

}  // namespace llmt::server::http
