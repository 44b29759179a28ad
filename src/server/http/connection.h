// One client socket (non-blocking) and the bytes read from it that no request has used yet. The event
// loop reads heads into it without waiting; a worker reads bodies and writes answers through it with
// deadlines (poll), so no call waits longer than it was given. Owned by one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace llmt::server::http {

using Clock = std::chrono::steady_clock;

class Connection {
public:
    explicit Connection(int fd) : fd_(fd) {}
    ~Connection();
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    int fd() const { return fd_; }
    std::string& buffer() { return buffer_; }

    enum class Read { kData, kWouldBlock, kClosed };
    // One non-blocking read of up to `max` bytes appended to buffer().
    Read read_some(size_t max);
    // Waits until `deadline` for bytes and appends them; false when the peer closed. Throws HttpError
    // 408 request_timeout (with `what` in the message) at the deadline.
    bool read_until(Clock::time_point deadline, const char* what);
    // Writes all of `data`; each wait for the client to take bytes is bounded by `timeout`. False when
    // the client is gone or too slow (the connection is then unusable).
    bool write_all(std::string_view data, std::chrono::milliseconds timeout);
    // Best effort, never waits: for short refusals written by the event loop.
    void write_now(std::string_view data);
    // The peer has not hung up and the socket takes bytes.
    bool is_writable() const;
    // No more writes from us (the client sees the end of the answer), reads go on.
    void shutdown_write();
    // Acknowledges what arrived now instead of after the delayed-ACK timer (TCP_QUICKACK): a client
    // that writes a request's head and body in two writes without TCP_NODELAY holds the body (Nagle)
    // until the head is acknowledged, which on Linux is up to 40 ms later. Called before waiting for
    // a body.
    void ack_now();

private:
    int fd_;
    std::string buffer_;
};

}  // namespace llmt::server::http
