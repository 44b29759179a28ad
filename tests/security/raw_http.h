// Raw-socket HTTP probes for the security tests: a connection with every wait bounded, the status and
// body of raw answers, a server's peak RSS, and a /healthz watcher. Header-only, for tests.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>

namespace llmt::testing {

using Clock = std::chrono::steady_clock;

constexpr double kProbeTimeoutS = 5;        // a bound for one probe, far above its normal few ms
constexpr int64_t kMaxRssGrowthKb = 64 << 10;  // the acceptance bound for the memory probes

// A raw TCP connection to the server with every wait bounded.
class RawConn {
public:
    // `receive_buffer` > 0: the socket's SO_RCVBUF, set before connecting (a client that reads little).
    explicit RawConn(int port, int receive_buffer = 0) {
        fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        if (receive_buffer > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<uint16_t>(port));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        timeval tv{static_cast<time_t>(kProbeTimeoutS), 0};
        ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    }
    ~RawConn() { ::close(fd_); }
    bool connected() const { return connected_; }
    // False once the server stopped taking bytes (closed, reset, or no progress within the bound).
    bool send(std::string_view data) {
        while (!data.empty()) {
            ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
            if (n <= 0) return false;
            data.remove_prefix(static_cast<size_t>(n));
        }
        return true;
    }
    // Reads one response (head + Content-Length body) or until close, for at most `timeout_s`.
    // Returns the raw bytes ("" when nothing came). A "100 Continue" interim answer is kept in front.
    std::string read_response(double timeout_s = kProbeTimeoutS) {
        auto until =
            Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
        for (;;) {
            if (complete()) break;
            int left =
                static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count());
            if (left <= 0) break;
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, left) <= 0) break;
            char buf[65536];
            ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
            if (n <= 0) break;
            got_.append(buf, static_cast<size_t>(n));
        }
        return got_;
    }
    // True when the server closed the connection within `timeout_s` (after what it sent).
    bool closed_within(double timeout_s) {
        auto until =
            Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
        while (Clock::now() < until) {
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, 100) <= 0) continue;
            char buf[4096];
            ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
            if (n <= 0) return true;
            got_.append(buf, static_cast<size_t>(n));
        }
        return false;
    }
    const std::string& received() const { return got_; }

private:
    bool complete() const {
        size_t start = 0;
        while (got_.compare(start, 12, "HTTP/1.1 100") == 0) {
            size_t e = got_.find("\r\n\r\n", start);
            if (e == std::string::npos) return false;
            start = e + 4;
        }
        size_t end = got_.find("\r\n\r\n", start);
        if (end == std::string::npos) return false;
        std::string head = got_.substr(start, end - start);
        for (auto& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        size_t cl = head.find("content-length:");
        if (cl == std::string::npos) return false;
        return got_.size() >= end + 4 + std::stoul(head.substr(cl + 15));
    }
    int fd_ = -1;
    bool connected_ = false;
    std::string got_;
};

// The final status in raw response bytes (after any 100 Continue), or 0.
inline int status_of(const std::string& raw) {
    size_t pos = raw.rfind("HTTP/1.1 ");
    while (pos != std::string::npos && raw.compare(pos, 12, "HTTP/1.1 100") == 0) pos = std::string::npos;
    if (pos == std::string::npos || raw.size() < pos + 12) return 0;
    return std::stoi(raw.substr(pos + 9, 3));
}

inline std::string body_of(const std::string& raw) {
    size_t e = raw.rfind("\r\n\r\n");
    return e == std::string::npos ? std::string() : raw.substr(e + 4);
}

inline int64_t vm_hwm_kb(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6));
    return -1;
}

// One GET with `Connection: close`, bounded by kProbeTimeoutS; returns the status (0: no answer).
inline int probe(int port, const std::string& path, const std::string& token = "") {
    RawConn c(port);
    if (!c.connected()) return 0;
    std::string req = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
    if (!token.empty()) req += "Authorization: Bearer " + token + "\r\n";
    if (!c.send(req + "\r\n")) return 0;
    return status_of(c.read_response());
}

// Probes /healthz every 200 ms on its own thread until destroyed; counts the probes that failed.
class HealthWatch {
public:
    explicit HealthWatch(int port) : thread_([this, port] {
        while (!done_) {
            ++probes_;
            if (probe(port, "/healthz") != 200) ++failures_;
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
    }) {}
    ~HealthWatch() { finish(); }
    void finish() {
        done_ = true;
        if (thread_.joinable()) thread_.join();
    }
    int probes() const { return probes_; }
    int failures() const { return failures_; }

private:
    std::atomic<bool> done_{false};
    std::atomic<int> probes_{0}, failures_{0};
    std::thread thread_;
};

}  // namespace llmt::testing
