// The store server. Each connection starts without a generation; its first bytes decide it: torch
// 2.x clients open with VALIDATE (code 0) followed by the u32 magic, while a torch <= 1.13 client's
// first query is any code, and a 1.13 SET (code 0) is followed by a u64 key length whose low four
// bytes cannot equal the magic (that would be a key of more than 1 GB, beyond kMaxStoreString).
// Replies follow torch's servers byte for byte (1.13: TCPStore.cpp's master daemon; 2.x: the libuv
// backend): set/append/multi_set answer nothing, waits answer STOP_WAITING when their last missing
// key is set, cancel_wait answers WAIT_CANCELED. A malformed query closes only its connection.
#include "distributed/tcp_store_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/error.h"
#include "distributed/torch_store_wire.h"

namespace llmt::dist {
namespace {

using Gen = TorchStoreGeneration;

struct Conn {
    std::string in, out;
    std::optional<Gen> gen;
    bool waiting = false;
    std::unordered_set<std::string> awaited;  // keys of the parked wait that are not set yet
};

enum class Step { kDone, kIncomplete, kClose };

int listen_on(int port) {
    int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const bool v6 = fd >= 0;
    if (!v6) fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw DistError(fmt::format("store server: socket(): {}", std::strerror(errno)));
    int one = 1, zero = 0;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rc;
    if (v6) {
        // Dual stack: IPv4 clients arrive as ::ffff:a.b.c.d, so one socket serves both families.
        ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        sockaddr_in6 a{};
        a.sin6_family = AF_INET6;
        a.sin6_addr = in6addr_any;
        a.sin6_port = htons(static_cast<uint16_t>(port));
        rc = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    } else {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_ANY);
        a.sin_port = htons(static_cast<uint16_t>(port));
        rc = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    }
    if (rc != 0 || ::listen(fd, 1024) != 0) {
        int e = errno;
        ::close(fd);
        throw DistError(fmt::format("store server: cannot listen on port {}: {}{}", port, std::strerror(e),
                                    e == EADDRINUSE ? "\nhint: another job uses this MASTER_PORT; pick "
                                                      "another or use port 0 (llmtrain launch --standalone)"
                                                    : ""));
    }
    return fd;
}

int bound_port(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
    return ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                          : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

}  // namespace

// The key-value data and the connections; touched only by the serving thread.
struct TcpStoreServer::State {
    std::map<int, Conn> conns;
    std::unordered_map<std::string, std::string> data;
    std::unordered_map<std::string, std::deque<std::string>> queues;

    // ------------------------------------------------------------ connection I/O

    void accept_one(int listen_fd) {
        int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) return;
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        conns[fd];
    }

    // False when the connection should be closed (peer gone or a malformed query).
    bool service(int fd, Conn& c, short revents) {
        if (revents & POLLIN) {
            // set/append/multi_set have no reply, so a client may send one and close at once: the
            // queries read before the end of the stream still run.
            bool open = true;
            char buf[65536];
            for (;;) {
                ssize_t n = ::recv(fd, buf, sizeof buf, 0);
                if (n > 0) {
                    c.in.append(buf, static_cast<size_t>(n));
                    continue;
                }
                if (n < 0 && errno == EINTR) continue;
                open = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
                break;
            }
            if (!parse(c) || !open) {
                flush_all();
                return false;
            }
        } else if (revents & (POLLERR | POLLHUP | POLLNVAL)) {
            return false;
        }
        return flush_all();
    }

    static bool flush(int fd, Conn& c) {
        while (!c.out.empty()) {
            ssize_t n = ::send(fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
            if (n > 0) {
                c.out.erase(0, static_cast<size_t>(n));
            } else if (n < 0 && errno == EINTR) {
                continue;
            } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                break;
            } else {
                return false;
            }
        }
        return true;
    }

    // A set on one connection may answer parked waits of others: write what is pending everywhere.
    // A connection whose send fails is closed on its next poll event (POLLERR/POLLHUP).
    bool flush_all() {
        for (auto& [fd, c] : conns) flush(fd, c);
        return true;
    }

    // ------------------------------------------------------------ parsing

    // Decides the generation from the first bytes; false while they are not all there.
    static bool detect(Conn& c) {
        if (c.gen) return true;
        if (c.in.empty()) return false;
        if (c.in[0] != 0) {
            c.gen = Gen::kTorch1;
            return true;
        }
        if (c.in.size() < 5) return false;
        uint32_t magic;
        std::memcpy(&magic, c.in.data() + 1, 4);
        c.gen = magic == kTorchValidationMagic ? Gen::kTorch2 : Gen::kTorch1;
        return true;
    }

    // Runs every complete query in c.in. False on a malformed or unsupported query.
    bool parse(Conn& c) {
        while (detect(c)) {
            WireReader r(c.in);
            uint8_t code = 0;
            if (!r.u8(code)) return true;
            auto q = query_of(*c.gen, code);
            if (!q) return false;
            Step s;
            try {
                s = execute(c, *q, r);
            } catch (const std::exception&) {  // an absurd length, add to a non-integer value
                return false;
            }
            if (s == Step::kClose) return false;
            if (s == Step::kIncomplete) return true;
            c.in.erase(0, r.pos());
        }
        return true;
    }

    // ------------------------------------------------------------ queries

    // Reads the query's fields first (kIncomplete before any effect when they are not all there),
    // then acts and queues the reply.
    Step execute(Conn& c, StoreQuery q, WireReader& r) {
        WireWriter w;
        std::string key, value, expected;
        std::vector<std::string> keys;
        int64_t delta = 0;
        uint32_t u = 0;
        switch (q) {
            case StoreQuery::kValidate:
                if (!r.u32(u)) return Step::kIncomplete;
                return u == kTorchValidationMagic ? Step::kDone : Step::kClose;
            case StoreQuery::kPing:
                if (!r.u32(u)) return Step::kIncomplete;
                w.u32(u);
                break;
            case StoreQuery::kSet:
            case StoreQuery::kAppend:
                if (!r.bytes(key) || !r.bytes(value)) return Step::kIncomplete;
                if (q == StoreQuery::kSet) data[key] = std::move(value);
                else data[key] += value;
                key_set(key);
                return Step::kDone;
            case StoreQuery::kCompareSet:
                if (!r.bytes(key) || !r.bytes(expected) || !r.bytes(value)) return Step::kIncomplete;
                w.bytes(compare_set(key, expected, value));
                break;
            case StoreQuery::kGet:
                if (!r.bytes(key)) return Step::kIncomplete;
                w.bytes(value_of(key));
                break;
            case StoreQuery::kAdd:
                if (!r.bytes(key) || !r.i64(delta)) return Step::kIncomplete;
                w.i64(add(key, delta));
                break;
            case StoreQuery::kCheck:
                if (!r.keys(keys)) return Step::kIncomplete;
                w.u8(static_cast<uint8_t>(all_present(keys) ? CheckReply::kReady : CheckReply::kNotReady));
                break;
            case StoreQuery::kWait:
                if (!r.keys(keys)) return Step::kIncomplete;
                park(c, keys);
                if (c.waiting) return Step::kDone;
                w.u8(static_cast<uint8_t>(WaitReply::kStopWaiting));
                break;
            case StoreQuery::kCancelWait:
                c.waiting = false;
                c.awaited.clear();
                w.u8(static_cast<uint8_t>(WaitReply::kWaitCanceled));
                break;
            case StoreQuery::kNumKeys:
                w.i64(static_cast<int64_t>(data.size()));
                break;
            case StoreQuery::kDeleteKey:
                if (!r.bytes(key)) return Step::kIncomplete;
                w.i64(static_cast<int64_t>(data.erase(key)));
                break;
            case StoreQuery::kMultiGet:
                if (!r.keys(keys)) return Step::kIncomplete;
                for (const auto& k : keys) w.bytes(value_of(k));
                break;
            case StoreQuery::kMultiSet:
                return multi_set(r);
            case StoreQuery::kQueuePush:
                if (!r.bytes(key) || !r.bytes(value)) return Step::kIncomplete;
                queues[key].push_back(std::move(value));
                wake_one(key);
                return Step::kDone;
            case StoreQuery::kQueuePop:
                if (!r.bytes(key)) return Step::kIncomplete;
                queue_pop(key, w);
                break;
            case StoreQuery::kQueueLen: {
                if (!r.bytes(key)) return Step::kIncomplete;
                auto it = queues.find(key);
                w.i64(it == queues.end() ? 0 : static_cast<int64_t>(it->second.size()));
                break;
            }
            case StoreQuery::kWatchKey:  // torch 1.x's key callbacks: not served (docs/distributed.md)
                return Step::kClose;
        }
        c.out += w.data();
        return Step::kDone;
    }

    Step multi_set(WireReader& r) {
        uint64_t n = 0;
        if (!r.u64(n)) return Step::kIncomplete;
        if (n > kMaxStoreKeys) return Step::kClose;
        std::vector<std::pair<std::string, std::string>> kvs(n);
        for (auto& [k, v] : kvs)
            if (!r.bytes(k) || !r.bytes(v)) return Step::kIncomplete;
        for (auto& [k, v] : kvs) {
            data[k] = std::move(v);
            key_set(k);
        }
        return Step::kDone;
    }

    std::string value_of(const std::string& key) const {
        auto it = data.find(key);
        return it == data.end() ? std::string() : it->second;
    }

    // torch's compare_set: a missing key is created only when expected is empty; the reply is the
    // value now stored (or `expected` itself for a missing key that was not created, as torch does).
    std::string compare_set(const std::string& key, const std::string& expected, const std::string& desired) {
        auto it = data.find(key);
        if (it == data.end()) {
            if (!expected.empty()) return expected;
            data[key] = desired;
            key_set(key);
            return desired;
        }
        if (it->second == expected) it->second = desired;
        key_set(key);
        return it->second;
    }

    int64_t add(const std::string& key, int64_t delta) {
        auto it = data.find(key);
        if (it != data.end()) delta += std::stoll(it->second);
        data[key] = std::to_string(delta);
        key_set(key);
        return delta;
    }

    void queue_pop(const std::string& key, WireWriter& w) {
        auto& q = queues[key];
        w.i64(static_cast<int64_t>(q.size()));
        if (q.empty()) return;
        w.bytes(q.front());
        q.pop_front();
    }

    bool present(const std::string& key) const {
        if (data.count(key) > 0) return true;
        auto it = queues.find(key);
        return it != queues.end() && !it->second.empty();
    }

    bool all_present(const std::vector<std::string>& keys) const {
        for (const auto& k : keys)
            if (!present(k)) return false;
        return true;
    }

    // A wait: answered now when every key is present, else parked on the keys not set yet.
    void park(Conn& c, const std::vector<std::string>& keys) {
        c.awaited.clear();
        c.waiting = false;
        if (all_present(keys)) return;
        for (const auto& k : keys)
            if (data.count(k) == 0) c.awaited.insert(k);
        c.waiting = true;
    }

    // Every wait parked on key loses it; those left with no missing key are answered.
    void key_set(const std::string& key) {
        for (auto& [fd, c] : conns) {
            if (!c.waiting || c.awaited.erase(key) == 0 || !c.awaited.empty()) continue;
            c.waiting = false;
            c.out.push_back(static_cast<char>(WaitReply::kStopWaiting));
        }
    }

    // A queue push releases one waiter (torch's queue_pop waits for the queue, then pops).
    void wake_one(const std::string& key) {
        for (auto& [fd, c] : conns) {
            if (!c.waiting || c.awaited.erase(key) == 0) continue;
            if (c.awaited.empty()) {
                c.waiting = false;
                c.out.push_back(static_cast<char>(WaitReply::kStopWaiting));
            }
            return;
        }
    }
};

TcpStoreServer::TcpStoreServer(int port) : state_(std::make_unique<State>()) {
    listen_fd_ = listen_on(port);
    port_ = bound_port(listen_fd_);
    if (::pipe2(wake_, O_CLOEXEC) != 0) {
        ::close(listen_fd_);
        throw DistError(fmt::format("store server: pipe(): {}", std::strerror(errno)));
    }
    thread_ = std::thread([this] { loop(); });
}

TcpStoreServer::~TcpStoreServer() {
    char c = 'q';
    (void)!::write(wake_[1], &c, 1);
    thread_.join();
    for (auto& [fd, _] : state_->conns) ::close(fd);
    ::close(listen_fd_);
    ::close(wake_[0]);
    ::close(wake_[1]);
}

void TcpStoreServer::loop() {
    auto& conns = state_->conns;
    for (;;) {
        std::vector<pollfd> fds;
        fds.push_back({wake_[0], POLLIN, 0});
        fds.push_back({listen_fd_, POLLIN, 0});
        for (auto& [fd, c] : conns)
            fds.push_back({fd, static_cast<short>(c.out.empty() ? POLLIN : POLLIN | POLLOUT), 0});
        if (::poll(fds.data(), fds.size(), -1) < 0) {
            if (errno == EINTR) continue;
            return;
        }
        if (fds[0].revents) return;
        if (fds[1].revents & POLLIN) state_->accept_one(listen_fd_);
        for (size_t i = 2; i < fds.size(); ++i) {
            if (fds[i].revents == 0) continue;
            auto it = conns.find(fds[i].fd);
            if (it == conns.end()) continue;
            if (!state_->service(it->first, it->second, fds[i].revents)) {
                ::close(it->first);
                conns.erase(it);
            }
        }
    }
}

}  // namespace llmt::dist
