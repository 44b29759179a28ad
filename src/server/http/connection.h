// One client socket (non-blocking), the bytes read from it that no request has used yet, and the part
// of an answer the client has not taken yet. The event loop reads heads into it and finishes answers
// without waiting; a worker reads bodies through it with deadlines (poll) and writes what the socket
// takes at once, so no call waits longer than it was given. Owned by one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace llmt::server::http {

using Clock = std::chrono::steady_clock;

class Connection {
public:
    // `peer`: the client's address without the port ("127.0.0.1", "::1"), for per-address limits.
    Connection(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {}
    ~Connection();
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    int fd() const { return fd_; }
    std::string& buffer() { return buffer_; }
    const std::string& peer() const { return peer_; }

    enum class Read { kData, kWouldBlock, kClosed };
    // One non-blocking read of up to `max` bytes appended to buffer().
    Read read_some(size_t max);
    // Waits until `deadline` for bytes and appends them; false when the peer closed. Throws HttpError
    // 408 request_timeout (with `what` in the message) at the deadline.
    bool read_until(Clock::time_point deadline, const char* what);
    // Writes all of `data`; each wait for the client to take bytes is bounded by `timeout`. False when
    // the client is gone or too slow (the connection is then unusable).
    bool write_all(std::string_view data, std::chrono::milliseconds timeout);
    // Queues `data` behind what is still unsent (an answer, at most one per connection at a time).
    void queue_write(std::string data);
    enum class Flush { kDone, kWouldBlock, kFailed };
    // Sends queued bytes until the socket would block; never waits.
    Flush flush();
    size_t unsent() const { return out_.size() - out_pos_; }
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
    std::string peer_;
    std::string buffer_;
    std::string out_;     // queued answer bytes; out_pos_ of them are sent
    size_t out_pos_ = 0;
};

}  // namespace llmt::server::http
