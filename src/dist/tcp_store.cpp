// TcpStore client and server. Frames: request = u8 op, u32 n, n x (u32 len, bytes); reply = u32 len,
// bytes. Integers are little-endian (all our hosts are). The server parks get/wait requests until
// their keys exist; the client bounds every request by the store timeout with poll().
#include "dist/tcp_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <unordered_map>
#include <vector>

#include "core/error.h"

namespace llmt::dist {
namespace {

enum Op : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kCheck = 4, kWait = 5 };
constexpr uint32_t kMaxFrame = 64u << 20;  // a garbage length prefix must not allocate gigabytes

using Clock = std::chrono::steady_clock;

void put_u32(std::string& s, uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); }
uint32_t get_u32(const char* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

std::string encode(uint8_t op, const std::vector<std::string>& args) {
    std::string s(1, static_cast<char>(op));
    put_u32(s, static_cast<uint32_t>(args.size()));
    for (const auto& a : args) {
        put_u32(s, static_cast<uint32_t>(a.size()));
        s += a;
    }
    return s;
}

int remaining_ms(Clock::time_point deadline) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return static_cast<int>(std::clamp<int64_t>(ms, 0, 1 << 30));
}

std::string join_keys(const std::vector<std::string>& keys) {
    std::string s;
    for (const auto& k : keys) s += (s.empty() ? "'" : ", '") + k + "'";
    return s;
}

}  // namespace

// ---------------------------------------------------------------- server

class TcpStoreServer {
public:
    explicit TcpStoreServer(int port) {
        listen_fd_ = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
        bool v6 = listen_fd_ >= 0;
        if (!v6) listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (listen_fd_ < 0) throw DistError(fmt::format("store server: socket(): {}", std::strerror(errno)));
        int one = 1, zero = 0;
        ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        int rc;
        if (v6) {
            // Dual stack: IPv4 clients arrive as ::ffff:a.b.c.d, so one socket serves both families.
            ::setsockopt(listen_fd_, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
            sockaddr_in6 a{};
            a.sin6_family = AF_INET6;
            a.sin6_addr = in6addr_any;
            a.sin6_port = htons(static_cast<uint16_t>(port));
            rc = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
        } else {
            sockaddr_in a{};
            a.sin_family = AF_INET;
            a.sin_addr.s_addr = htonl(INADDR_ANY);
            a.sin_port = htons(static_cast<uint16_t>(port));
            rc = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
        }
        if (rc != 0 || ::listen(listen_fd_, 1024) != 0) {
            int e = errno;
            ::close(listen_fd_);
            throw DistError(fmt::format("store server: cannot listen on port {}: {}{}", port, std::strerror(e),
                                        e == EADDRINUSE ? "\nhint: another job uses this MASTER_PORT; pick "
                                                          "another or use port 0 (llmtrain launch --standalone)"
                                                        : ""));
        }
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len);
        port_ = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                               : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
        if (::pipe2(wake_, O_CLOEXEC) != 0) {
            ::close(listen_fd_);
            throw DistError(fmt::format("store server: pipe(): {}", std::strerror(errno)));
        }
        thread_ = std::thread([this] { loop(); });
    }
    ~TcpStoreServer() {
        char c = 'q';
        (void)!::write(wake_[1], &c, 1);
        thread_.join();
        for (auto& [fd, _] : clients_) ::close(fd);
        ::close(listen_fd_);
        ::close(wake_[0]);
        ::close(wake_[1]);
    }
    TcpStoreServer(const TcpStoreServer&) = delete;
    TcpStoreServer& operator=(const TcpStoreServer&) = delete;
    int port() const { return port_; }

private:
    struct Client {
        std::string in, out;
        bool parked = false;  // a get/wait waits for keys
        uint8_t parked_op = 0;
        std::vector<std::string> parked_keys;
    };

    void loop() {
        for (;;) {
            std::vector<pollfd> fds;
            fds.push_back({wake_[0], POLLIN, 0});
            fds.push_back({listen_fd_, POLLIN, 0});
            for (auto& [fd, c] : clients_) {
                short ev = POLLIN;
                if (!c.out.empty()) ev |= POLLOUT;
                fds.push_back({fd, ev, 0});
            }
            if (::poll(fds.data(), fds.size(), -1) < 0) {
                if (errno == EINTR) continue;
                return;
            }
            if (fds[0].revents) return;
            if (fds[1].revents & POLLIN) accept_one();
            for (size_t i = 2; i < fds.size(); ++i) {
                if (fds[i].revents == 0) continue;
                int fd = fds[i].fd;
                auto it = clients_.find(fd);
                if (it == clients_.end()) continue;
                if (!service(fd, it->second, fds[i].revents)) {
                    ::close(fd);
                    clients_.erase(it);
                }
            }
        }
    }

    void accept_one() {
        int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) return;
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        clients_[fd];
    }

    // False when the connection should be closed (peer gone or protocol error).
    bool service(int fd, Client& c, short revents) {
        if (revents & POLLIN) {
            char buf[65536];
            for (;;) {
                ssize_t n = ::recv(fd, buf, sizeof buf, 0);
                if (n > 0) {
                    c.in.append(buf, static_cast<size_t>(n));
                    continue;
                }
                if (n == 0) return false;
                if (errno == EINTR) continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK) break;
                return false;
            }
            if (!parse(c)) return false;
        } else if (revents & (POLLERR | POLLHUP | POLLNVAL)) {
            return false;
        }
        return flush(fd, c);
    }

    bool flush(int fd, Client& c) {
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

    // Consumes every complete frame in c.in. False on a malformed frame.
    bool parse(Client& c) {
        while (!c.parked) {
            if (c.in.size() < 5) return true;
            uint8_t op = static_cast<uint8_t>(c.in[0]);
            uint32_t n = get_u32(c.in.data() + 1);
            if (op < kSet || op > kWait || n > 1u << 16) return false;
            size_t pos = 5;
            std::vector<std::string> args;
            for (uint32_t i = 0; i < n; ++i) {
                if (c.in.size() < pos + 4) return true;
                uint32_t len = get_u32(c.in.data() + pos);
                if (len > kMaxFrame) return false;
                if (c.in.size() < pos + 4 + len) return true;
                args.emplace_back(c.in, pos + 4, len);
                pos += 4 + len;
            }
            c.in.erase(0, pos);
            try {
                if (!execute(c, op, std::move(args))) return false;
            } catch (const std::exception&) {  // add on a non-integer value, or a garbage delta
                return false;
            }
        }
        return true;
    }

    static void reply(Client& c, const std::string& s) {
        put_u32(c.out, static_cast<uint32_t>(s.size()));
        c.out += s;
    }

    bool all_present(const std::vector<std::string>& keys) const {
        return std::all_of(keys.begin(), keys.end(), [&](const auto& k) { return data_.count(k) > 0; });
    }

    bool execute(Client& c, uint8_t op, std::vector<std::string> args) {
        switch (op) {
            case kSet:
                if (args.size() != 2) return false;
                data_[args[0]] = std::move(args[1]);
                reply(c, "");
                wake_parked();
                return true;
            case kAdd: {
                if (args.size() != 2) return false;
                int64_t cur = 0, delta = 0;
                auto it = data_.find(args[0]);
                if (it != data_.end()) cur = std::stoll(it->second);
                delta = std::stoll(args[1]);
                data_[args[0]] = std::to_string(cur + delta);
                reply(c, std::to_string(cur + delta));
                wake_parked();
                return true;
            }
            case kCheck:
                reply(c, all_present(args) ? "1" : "0");
                return true;
            case kGet:
            case kWait:
                if (op == kGet && args.size() != 1) return false;
                c.parked = true;
                c.parked_op = op;
                c.parked_keys = std::move(args);
                answer_if_ready(c);
                return true;
        }
        return false;
    }

    void answer_if_ready(Client& c) {
        if (!c.parked || !all_present(c.parked_keys)) return;
        reply(c, c.parked_op == kGet ? data_[c.parked_keys[0]] : std::string());
        c.parked = false;
        c.parked_keys.clear();
    }

    // A set/add may complete parked requests of other clients; answer them and parse what they
    // pipelined behind (they do not, but a parked client must not stall its buffered input).
    void wake_parked() {
        for (auto& [fd, c] : clients_) {
            if (!c.parked) continue;
            answer_if_ready(c);
            if (!c.parked) {
                parse(c);
                flush(fd, c);
            }
        }
    }

    int listen_fd_ = -1;
    int wake_[2] = {-1, -1};
    int port_ = 0;
    std::map<int, Client> clients_;
    std::unordered_map<std::string, std::string> data_;
    std::thread thread_;
};

// ---------------------------------------------------------------- client

TcpStore::TcpStore(const std::string& host, int port, bool is_server, int world_size,
                   std::chrono::milliseconds timeout)
    : host_(host), port_(port), world_size_(world_size), timeout_(timeout) {
    if (is_server) {
        server_ = std::make_unique<TcpStoreServer>(port);
        port_ = server_->port();
    }
    if (port_ <= 0 || port_ > 65535) {
        throw DistError(fmt::format("store: port {} is not a TCP port (1..65535)", port_));
    }
    std::lock_guard<std::mutex> lock(mu_);
    connect_locked();
}

TcpStore::~TcpStore() {
    std::lock_guard<std::mutex> lock(mu_);
    disconnect_locked();
}

std::string TcpStore::describe() const { return fmt::format("tcp://{}:{}", host_, port_); }

void TcpStore::set_timeout(std::chrono::milliseconds timeout) {
    std::lock_guard<std::mutex> lock(mu_);
    timeout_ = timeout;
}
std::chrono::milliseconds TcpStore::timeout() const {
    std::lock_guard<std::mutex> lock(mu_);
    return timeout_;
}

void TcpStore::disconnect_locked() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

// Connects with retries: refused connections (server not up yet) and names that do not resolve
// yet (a Kubernetes headless Service before the pod is ready) are retried with backoff.
void TcpStore::connect_locked() {
    auto deadline = Clock::now() + timeout_;
    std::string last_error = "no attempt";
    auto backoff = std::chrono::milliseconds(10);
    for (int attempt = 0;; ++attempt) {
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        addrinfo* res = nullptr;
        std::string port_s = std::to_string(port_);
        int gai = ::getaddrinfo(host_.c_str(), port_s.c_str(), &hints, &res);
        if (gai != 0) {
            last_error = fmt::format("cannot resolve '{}': {}", host_, ::gai_strerror(gai));
        } else {
            for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
                int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
                if (fd < 0) {
                    last_error = std::strerror(errno);
                    continue;
                }
                int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
                if (rc != 0 && errno == EINPROGRESS) {
                    pollfd p{fd, POLLOUT, 0};
                    int ms = std::min(remaining_ms(deadline), 5000);
                    if (::poll(&p, 1, ms) == 1) {
                        int err = 0;
                        socklen_t len = sizeof err;
                        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
                        rc = err == 0 ? 0 : -1;
                        errno = err;
                    } else {
                        rc = -1;
                        errno = ETIMEDOUT;
                    }
                }
                if (rc == 0) {
                    int one = 1;
                    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    fd_ = fd;
                    ::freeaddrinfo(res);
                    return;
                }
                last_error = std::strerror(errno);
                ::close(fd);
            }
            ::freeaddrinfo(res);
        }
        auto now = Clock::now();
        if (now >= deadline) break;
        std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
        backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
    }
    throw DistTimeout(fmt::format(
        "store: could not connect to {} within {:.1f} s (world size {}; last error: {})\nhint: is rank 0 "
        "running and MASTER_ADDR/MASTER_PORT the same on every rank?",
        describe(), timeout_.count() / 1000.0, world_size_, last_error));
}

std::string TcpStore::request(uint8_t op, const std::vector<std::string>& args, const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    if (fd_ < 0) connect_locked();
    auto deadline = Clock::now() + timeout_;
    auto fail = [&](const std::string& why, bool timed_out) -> std::string {
        // The connection may still carry a late reply to this request: drop it, reconnect next time.
        disconnect_locked();
        std::string msg = fmt::format("store {}: {} {}", describe(), what, why);
        if (timed_out) throw DistTimeout(msg);
        throw DistError(msg + "\nhint: rank 0 (which serves the store) may have exited");
    };
    std::string frame = encode(op, args);
    size_t sent = 0;
    while (sent < frame.size()) {
        ssize_t n = ::send(fd_, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
        if (n > 0) {
            sent += static_cast<size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            pollfd p{fd_, POLLOUT, 0};
            if (::poll(&p, 1, remaining_ms(deadline)) == 0) {
                return fail(fmt::format("timed out after {:.1f} s", timeout_.count() / 1000.0), true);
            }
            continue;
        }
        return fail(fmt::format("failed: {}", std::strerror(errno)), false);
    }
    std::string in;
    size_t want = 4;
    bool have_len = false;
    char buf[65536];
    while (in.size() < want) {
        pollfd p{fd_, POLLIN, 0};
        int pr = ::poll(&p, 1, remaining_ms(deadline));
        if (pr < 0 && errno == EINTR) continue;
        if (pr == 0) return fail(fmt::format("timed out after {:.1f} s", timeout_.count() / 1000.0), true);
        ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
        if (n == 0) return fail("failed: the store server closed the connection", false);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
            return fail(fmt::format("failed: {}", std::strerror(errno)), false);
        }
        in.append(buf, static_cast<size_t>(n));
        if (!have_len && in.size() >= 4) {
            uint32_t len = get_u32(in.data());
            if (len > kMaxFrame) return fail("failed: malformed reply", false);
            want = 4 + len;
            have_len = true;
        }
    }
    return in.substr(4, want - 4);
}

void TcpStore::set(const std::string& key, const std::string& value) {
    request(kSet, {key, value}, fmt::format("set '{}'", key));
}

std::string TcpStore::get(const std::string& key) {
    return request(kGet, {key}, fmt::format("get of key '{}'", key));
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
    return std::stoll(request(kAdd, {key, std::to_string(delta)}, fmt::format("add to key '{}'", key)));
}

void TcpStore::wait(const std::vector<std::string>& keys) {
    request(kWait, keys, fmt::format("wait for key(s) {}", join_keys(keys)));
}

bool TcpStore::check(const std::vector<std::string>& keys) {
    return request(kCheck, keys, fmt::format("check of key(s) {}", join_keys(keys))) == "1";
}

std::unique_ptr<Store> make_tcp_store(const std::string& host, int port, bool is_server, int world_size,
                                      std::chrono::milliseconds timeout) {
    return std::make_unique<TcpStore>(host, port, is_server, world_size, timeout);
}

}  // namespace llmt::dist
