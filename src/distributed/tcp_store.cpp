// TcpStore client. Every request is bounded by the store timeout with poll(); a timeout or a lost
// server is an exception naming the query, the key(s) and the store, never a hang. Waits that time
// out are cancelled the torch 2.x way (CANCEL_WAIT, answered WAIT_CANCELED) so the connection stays
// usable; a torch 1.13 server has no cancel, so the connection is dropped and reopened.
#include "distributed/tcp_store.h"

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
#include <thread>

#include "core/error.h"
#include "distributed/tcp_store_server.h"

namespace llmt::dist {
namespace {

using Clock = std::chrono::steady_clock;
using Gen = TorchStoreGeneration;

// The handshake's PING nonce. Its bytes are chosen so that a torch 1.13 server, which reads the
// VALIDATE code as SET and the next eight bytes (magic, PING code, three nonce bytes) as the key's
// length, sees a length of about 5e18 bytes, fails to allocate it and closes the connection.
constexpr uint32_t kHandshakeNonce = 0x4C4D4C54;
// After a timed-out wait the server answers CANCEL_WAIT at once; this bounds a server that does not.
constexpr auto kCancelGrace = std::chrono::seconds(10);

int remaining_ms(Clock::time_point deadline) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return static_cast<int>(std::clamp<int64_t>(ms, 0, 1 << 30));
}

std::string join_keys(const std::vector<std::string>& keys) {
    std::string s;
    for (const auto& k : keys) s += (s.empty() ? "'" : ", '") + k + "'";
    return s;
}

// torch's client prefixes every key with "/" (TCPStore's keyPrefix_).
std::string wire_key(const std::string& key) { return "/" + key; }

enum class Io { kOk, kTimeout, kClosed, kError };

}  // namespace

// One TCP connection with deadline-bounded exact reads and writes.
class TcpStore::Connection {
public:
    explicit Connection(int fd) : fd_(fd) {}
    ~Connection() { ::close(fd_); }
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    // One attempt over every address of host; nullptr and last_error set when none connects.
    static std::unique_ptr<Connection> open(const std::string& host, int port, Clock::time_point deadline,
                                            std::string& last_error) {
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        addrinfo* res = nullptr;
        int gai = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
        if (gai != 0) {
            last_error = fmt::format("cannot resolve '{}': {}", host, ::gai_strerror(gai));
            return nullptr;
        }
        std::unique_ptr<Connection> conn;
        for (addrinfo* ai = res; ai != nullptr && !conn; ai = ai->ai_next) {
            int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
            if (fd < 0) {
                last_error = std::strerror(errno);
                continue;
            }
            if (connect_fd(fd, ai, deadline, last_error)) {
                int one = 1;
                ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                conn = std::make_unique<Connection>(fd);
            } else {
                ::close(fd);
            }
        }
        ::freeaddrinfo(res);
        return conn;
    }

    Io send_all(const std::string& data, Clock::time_point deadline) {
        size_t sent = 0;
        while (sent < data.size()) {
            ssize_t n = ::send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
            if (n > 0) {
                sent += static_cast<size_t>(n);
            } else if (n < 0 && errno == EINTR) {
                continue;
            } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                pollfd p{fd_, POLLOUT, 0};
                if (::poll(&p, 1, remaining_ms(deadline)) == 0) return Io::kTimeout;
            } else {
                error_ = std::strerror(errno);
                return errno == EPIPE || errno == ECONNRESET ? Io::kClosed : Io::kError;
            }
        }
        return Io::kOk;
    }

    Io recv_exact(void* dst, size_t n, Clock::time_point deadline) {
        auto* out = static_cast<char*>(dst);
        size_t got = 0;
        while (got < n) {
            pollfd p{fd_, POLLIN, 0};
            int pr = ::poll(&p, 1, remaining_ms(deadline));
            if (pr < 0 && errno == EINTR) continue;
            if (pr == 0) return Io::kTimeout;
            ssize_t r = ::recv(fd_, out + got, n - got, 0);
            if (r == 0) return Io::kClosed;
            if (r < 0) {
                if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
                error_ = std::strerror(errno);
                return errno == ECONNRESET ? Io::kClosed : Io::kError;
            }
            got += static_cast<size_t>(r);
        }
        return Io::kOk;
    }

    const std::string& error() const { return error_; }

private:
    static bool connect_fd(int fd, addrinfo* ai, Clock::time_point deadline, std::string& last_error) {
        int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
        if (rc != 0 && errno == EINPROGRESS) {
            pollfd p{fd, POLLOUT, 0};
            if (::poll(&p, 1, std::min(remaining_ms(deadline), 5000)) == 1) {
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
        if (rc != 0) last_error = std::strerror(errno);
        return rc == 0;
    }

    int fd_;
    std::string error_;
};

// ---------------------------------------------------------------- connection and handshake

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
    conn_.reset();
}

std::string TcpStore::describe() const { return fmt::format("tcp://{}:{}", host_, port_); }

TorchStoreGeneration TcpStore::generation() const {
    std::lock_guard<std::mutex> lock(mu_);
    return gen_;
}

void TcpStore::set_timeout(std::chrono::milliseconds timeout) {
    std::lock_guard<std::mutex> lock(mu_);
    timeout_ = timeout;
}
std::chrono::milliseconds TcpStore::timeout() const {
    std::lock_guard<std::mutex> lock(mu_);
    return timeout_;
}

// torch 2.x's opening: VALIDATE with the magic, then PING, whose echo proves a 2.x server. A 1.13
// server closes the connection instead (see kHandshakeNonce). Once the generation is known, a 1.13
// connection needs no handshake and a 2.x one gets torch's.
bool TcpStore::handshake_locked(Deadline deadline) {
    if (detected_ && gen_ == Gen::kTorch1) return true;
    WireWriter w;
    w.u8(*query_code(Gen::kTorch2, StoreQuery::kValidate)).u32(kTorchValidationMagic);
    w.u8(*query_code(Gen::kTorch2, StoreQuery::kPing)).u32(kHandshakeNonce);
    Io io = conn_->send_all(w.data(), deadline);
    uint32_t echo = 0;
    if (io == Io::kOk) io = conn_->recv_exact(&echo, sizeof echo, deadline);
    if (io == Io::kClosed && !detected_) return false;
    if (io == Io::kTimeout) {
        conn_.reset();
        throw DistTimeout(fmt::format("store {}: the server did not answer torch's store handshake within "
                                      "{:.1f} s\nhint: is MASTER_PORT the port of a torch TCPStore or an "
                                      "llmtrain store?",
                                      describe(), timeout_.count() / 1000.0));
    }
    if (io != Io::kOk || echo != kHandshakeNonce) {
        std::string why = io == Io::kOk ? fmt::format("a ping answered {:#x} instead of {:#x}", echo, kHandshakeNonce)
                                        : "the connection failed: " + conn_->error();
        conn_.reset();
        throw DistError(fmt::format("store {}: torch 2.x handshake failed: {}", describe(), why));
    }
    gen_ = Gen::kTorch2;
    detected_ = true;
    return true;
}

// Connects with retries: refused connections (server not up yet) and names that do not resolve
// yet (a Kubernetes headless Service before the pod is ready) are retried with backoff.
void TcpStore::connect_locked() {
    const auto start_deadline = deadline();
    std::string last_error = "no attempt";
    auto backoff = std::chrono::milliseconds(10);
    for (;;) {
        conn_ = Connection::open(host_, port_, start_deadline, last_error);
        if (conn_) {
            if (handshake_locked(start_deadline)) return;
            // A torch <= 1.13 server dropped the 2.x handshake: reconnect and speak 1.13.
            gen_ = Gen::kTorch1;
            detected_ = true;
            conn_ = Connection::open(host_, port_, start_deadline, last_error);
            if (conn_) return;
        }
        auto now = Clock::now();
        if (now >= start_deadline) break;
        std::this_thread::sleep_for(std::min<Clock::duration>(backoff, start_deadline - now));
        backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
    }
    throw DistTimeout(fmt::format(
        "store: could not connect to {} within {:.1f} s (world size {}; last error: {})\nhint: is rank 0 "
        "running and MASTER_ADDR/MASTER_PORT the same on every rank?",
        describe(), timeout_.count() / 1000.0, world_size_, last_error));
}

void TcpStore::ensure_connected_locked() {
    if (!conn_) connect_locked();
}

// ---------------------------------------------------------------- framing

[[noreturn]] void TcpStore::fail_locked(const std::string& what, const std::string& why, bool timed_out) {
    // The connection may still carry a late reply to this request: drop it, reconnect next time.
    conn_.reset();
    std::string msg = fmt::format("store {}: {} {}", describe(), what, why);
    if (timed_out) throw DistTimeout(msg);
    throw DistError(msg + "\nhint: the process serving the store (rank 0, or the torchrun agent) may have exited");
}

uint8_t TcpStore::code_locked(StoreQuery q, const std::string& what) const {
    auto code = query_code(gen_, q);
    if (!code) {
        throw DistError(fmt::format("store {}: {}: the server speaks {}'s store protocol, which has no {} query",
                                    describe(), what, to_string(gen_), to_string(q)));
    }
    return *code;
}

void TcpStore::send_locked(const WireWriter& w, const std::string& what, Deadline deadline) {
    Io io = conn_->send_all(w.data(), deadline);
    if (io == Io::kTimeout)
        fail_locked(what, fmt::format("timed out after {:.1f} s", timeout_.count() / 1000.0), true);
    if (io != Io::kOk) fail_locked(what, "failed: " + conn_->error(), false);
}

void TcpStore::recv_locked(void* dst, size_t n, const std::string& what, Deadline deadline) {
    Io io = conn_->recv_exact(dst, n, deadline);
    if (io == Io::kTimeout)
        fail_locked(what, fmt::format("timed out after {:.1f} s", timeout_.count() / 1000.0), true);
    if (io == Io::kClosed) fail_locked(what, "failed: the store server closed the connection", false);
    if (io != Io::kOk) fail_locked(what, "failed: " + conn_->error(), false);
}

uint8_t TcpStore::recv_u8_locked(const std::string& what, Deadline deadline) {
    uint8_t v = 0;
    recv_locked(&v, 1, what, deadline);
    return v;
}

int64_t TcpStore::recv_i64_locked(const std::string& what, Deadline deadline) {
    int64_t v = 0;
    recv_locked(&v, sizeof v, what, deadline);
    return v;
}

std::string TcpStore::recv_bytes_locked(const std::string& what, Deadline deadline) {
    uint64_t n = 0;
    recv_locked(&n, sizeof n, what, deadline);
    if (n > kMaxStoreString) fail_locked(what, fmt::format("failed: a reply of {} bytes (malformed)", n), false);
    std::string s(n, '\0');
    if (n > 0) recv_locked(s.data(), n, what, deadline);
    return s;
}

// ---------------------------------------------------------------- queries

// WAIT, answered STOP_WAITING once every key exists. On the timeout a 2.x server gets CANCEL_WAIT
// and answers WAIT_CANCELED (after a STOP_WAITING that crossed the cancel, which is dropped).
void TcpStore::wait_locked(const std::vector<std::string>& keys, const std::string& what) {
    ensure_connected_locked();
    std::vector<std::string> wire;
    for (const auto& k : keys) wire.push_back(wire_key(k));
    const auto until = deadline();
    send_locked(WireWriter().u8(code_locked(StoreQuery::kWait, what)).keys(wire), what, until);
    uint8_t reply = 0;
    Io io = conn_->recv_exact(&reply, 1, until);
    if (io == Io::kOk && reply == static_cast<uint8_t>(WaitReply::kStopWaiting)) return;
    if (io == Io::kOk) fail_locked(what, fmt::format("failed: wait answered {} (malformed)", reply), false);
    if (io == Io::kClosed) fail_locked(what, "failed: the store server closed the connection", false);
    if (io != Io::kOk && io != Io::kTimeout) fail_locked(what, "failed: " + conn_->error(), false);
    const std::string why = fmt::format("timed out after {:.1f} s", timeout_.count() / 1000.0);
    if (gen_ == Gen::kTorch1) fail_locked(what, why, true);
    const auto grace = Clock::now() + kCancelGrace;
    send_locked(WireWriter().u8(code_locked(StoreQuery::kCancelWait, what)), what, grace);
    reply = recv_u8_locked(what, grace);
    if (reply == static_cast<uint8_t>(WaitReply::kStopWaiting)) reply = recv_u8_locked(what, grace);
    if (reply != static_cast<uint8_t>(WaitReply::kWaitCanceled))
        fail_locked(what, fmt::format("failed: cancel_wait answered {} (malformed)", reply), false);
    throw DistTimeout(fmt::format("store {}: {} {}", describe(), what, why));
}

void TcpStore::set(const std::string& key, const std::string& value) {
    const std::string what = fmt::format("set '{}'", key);
    std::lock_guard<std::mutex> lock(mu_);
    ensure_connected_locked();
    send_locked(WireWriter().u8(code_locked(StoreQuery::kSet, what)).bytes(wire_key(key)).bytes(value), what,
                deadline());
}

std::string TcpStore::get(const std::string& key) {
    const std::string what = fmt::format("get of key '{}'", key);
    std::lock_guard<std::mutex> lock(mu_);
    wait_locked({key}, what);
    const auto until = deadline();
    send_locked(WireWriter().u8(code_locked(StoreQuery::kGet, what)).bytes(wire_key(key)), what, until);
    return recv_bytes_locked(what, until);
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
    const std::string what = fmt::format("add to key '{}'", key);
    std::lock_guard<std::mutex> lock(mu_);
    ensure_connected_locked();
    const auto until = deadline();
    send_locked(WireWriter().u8(code_locked(StoreQuery::kAdd, what)).bytes(wire_key(key)).i64(delta), what, until);
    return recv_i64_locked(what, until);
}

void TcpStore::wait(const std::vector<std::string>& keys) {
    std::lock_guard<std::mutex> lock(mu_);
    wait_locked(keys, fmt::format("wait for key(s) {}", join_keys(keys)));
}

bool TcpStore::check(const std::vector<std::string>& keys) {
    const std::string what = fmt::format("check of key(s) {}", join_keys(keys));
    std::lock_guard<std::mutex> lock(mu_);
    ensure_connected_locked();
    std::vector<std::string> wire;
    for (const auto& k : keys) wire.push_back(wire_key(k));
    const auto until = deadline();
    send_locked(WireWriter().u8(code_locked(StoreQuery::kCheck, what)).keys(wire), what, until);
    uint8_t r = recv_u8_locked(what, until);
    if (r > static_cast<uint8_t>(CheckReply::kNotReady))
        fail_locked(what, fmt::format("failed: check answered {} (malformed)", r), false);
    return r == static_cast<uint8_t>(CheckReply::kReady);
}

std::string TcpStore::compare_set(const std::string& key, const std::string& expected, const std::string& desired) {
    const std::string what = fmt::format("compare_set of key '{}'", key);
    std::lock_guard<std::mutex> lock(mu_);
    ensure_connected_locked();
    const auto until = deadline();
    send_locked(WireWriter()
                    .u8(code_locked(StoreQuery::kCompareSet, what))
                    .bytes(wire_key(key))
                    .bytes(expected)
                    .bytes(desired),
                what, until);
    return recv_bytes_locked(what, until);
}

bool TcpStore::delete_key(const std::string& key) {
    const std::string what = fmt::format("delete of key '{}'", key);
    std::lock_guard<std::mutex> lock(mu_);
    ensure_connected_locked();
    const auto until = deadline();
    send_locked(WireWriter().u8(code_locked(StoreQuery::kDeleteKey, what)).bytes(wire_key(key)), what, until);
    return recv_i64_locked(what, until) == 1;
}

int64_t TcpStore::num_keys() {
    const std::string what = "num_keys";
    std::lock_guard<std::mutex> lock(mu_);
    ensure_connected_locked();
    const auto until = deadline();
    send_locked(WireWriter().u8(code_locked(StoreQuery::kNumKeys, what)), what, until);
    return recv_i64_locked(what, until);
}

void TcpStore::append(const std::string& key, const std::string& value) {
    const std::string what = fmt::format("append to key '{}'", key);
    std::lock_guard<std::mutex> lock(mu_);
    ensure_connected_locked();
    send_locked(WireWriter().u8(code_locked(StoreQuery::kAppend, what)).bytes(wire_key(key)).bytes(value), what,
                deadline());
}

std::vector<std::string> TcpStore::multi_get(const std::vector<std::string>& keys) {
    const std::string what = fmt::format("multi_get of key(s) {}", join_keys(keys));
    std::lock_guard<std::mutex> lock(mu_);
    ensure_connected_locked();
    const uint8_t code = code_locked(StoreQuery::kMultiGet, what);
    wait_locked(keys, what);
    std::vector<std::string> wire;
    for (const auto& k : keys) wire.push_back(wire_key(k));
    const auto until = deadline();
    send_locked(WireWriter().u8(code).keys(wire), what, until);
    std::vector<std::string> values;
    for (size_t i = 0; i < keys.size(); ++i) values.push_back(recv_bytes_locked(what, until));
    return values;
}

void TcpStore::multi_set(const std::vector<std::string>& keys, const std::vector<std::string>& values) {
    const std::string what = fmt::format("multi_set of key(s) {}", join_keys(keys));
    if (keys.size() != values.size()) {
        throw DistError(
            fmt::format("store {}: {}: {} keys but {} values", describe(), what, keys.size(), values.size()));
    }
    std::lock_guard<std::mutex> lock(mu_);
    ensure_connected_locked();
    WireWriter w;
    w.u8(code_locked(StoreQuery::kMultiSet, what)).u64(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) w.bytes(wire_key(keys[i])).bytes(values[i]);
    send_locked(w, what, deadline());
}

void TcpStore::ping() {
    const std::string what = "ping";
    std::lock_guard<std::mutex> lock(mu_);
    ensure_connected_locked();
    const auto until = deadline();
    const uint32_t nonce = static_cast<uint32_t>(::getpid());
    send_locked(WireWriter().u8(code_locked(StoreQuery::kPing, what)).u32(nonce), what, until);
    uint32_t echo = 0;
    recv_locked(&echo, sizeof echo, what, until);
    if (echo != nonce) fail_locked(what, fmt::format("failed: answered {} instead of {}", echo, nonce), false);
}

std::unique_ptr<Store> make_tcp_store(const std::string& host, int port, bool is_server, int world_size,
                                      std::chrono::milliseconds timeout) {
    return std::make_unique<TcpStore>(host, port, is_server, world_size, timeout);
}

}  // namespace llmt::dist
