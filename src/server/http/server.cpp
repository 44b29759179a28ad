// The event loop (accepts, reads heads, enforces head deadlines, the connection caps and the
// per-address limits, finishes answers the client is slow to take, drains refused bodies) and the
// worker pool (runs exchanges); see server.h.
#include "server/http/server.h"

#include <arpa/inet.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "server/http/connection.h"
#include "server/http/http_error.h"

namespace llmt::server::http {

namespace {

constexpr int kLoopTickMs = 100;             // deadlines are checked at least this often
constexpr uint64_t kMaxDrainBytes = 64 << 20;  // a refused body is dropped up to this much, then cut
constexpr int kReadsPerWake = 64;            // 16 KiB reads per readiness event: one fast sender cannot hold the loop
constexpr int kReservedFds = 64;             // file descriptors kept for the store, logs and jobs
constexpr uint64_t kTrimAfterBodyBytes = 256 << 10;  // a request body this large returns freed memory after
// Blocks this large are mapped on their own and unmapped when freed, never carved from a worker's arena.
constexpr int kMmapThresholdBytes = 256 << 10;
// Once no exchange has run for this long, what the exchanges freed is returned to the system.
constexpr auto kTrimWhenIdleAfter = std::chrono::seconds(1);

// glibc raises its mmap threshold to the size of every mapped block freed (up to 32 MiB) and its trim
// threshold to twice that: after the first large request (a 900 KB override's copies free a 1.8 MB block;
// a 20-minute soak run took it to 4 MB) every block up to that size is carved from the arena of
// the worker that asked, and a worker arena keeps up to the trim threshold free at its top, which
// malloc_trim does not return. Each of up to 8 x cores arenas then holds its own high-water mark, and the
// marks rise with the largest block yet seen: the quiet server grew by ~40 MB per 10 minutes of mixed
// traffic with a few MB in use. A fixed threshold turns the adjustment off: large blocks go back to the
// system when freed, and the trim threshold stays at its default (128 KiB).
// (Under a sanitizer's allocator, which has no such threshold, mallopt does nothing and says so.)
void keep_large_blocks_out_of_arenas() {
    mallopt(M_MMAP_THRESHOLD, kMmapThresholdBytes);
}

Clock::duration seconds(double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// A connection the event loop owns: waiting for (the rest of) a request head, sending the rest of an
// answer the client was slow to take (nothing more is read from it meanwhile), or draining a body we
// refused before closing (so the client reads our answer instead of a reset).
struct Waiting {
    enum class State { kHead, kWriting, kDraining };
    std::unique_ptr<Connection> conn;
    State state = State::kHead;
    Clock::time_point since;     // when it began waiting: eviction takes the oldest
    Clock::time_point deadline;  // head deadline, whole-answer deadline or end of draining
    uint64_t drained = 0;
    AfterExchange after = AfterExchange::kClose;  // kWriting: what follows the answer
};

// What one client address holds now: open connections, and requests at a worker or being answered.
struct PeerCount {
    size_t connections = 0;
    size_t in_flight = 0;
};

struct Task {
    std::unique_ptr<Connection> conn;
    RequestHead head;
};

struct Returned {
    std::unique_ptr<Connection> conn;
    AfterExchange after;
};

// The client's address without its port, for the per-address limits.
std::string peer_address(const sockaddr_storage& addr) {
    char text[INET6_ADDRSTRLEN] = "";
    if (addr.ss_family == AF_INET)
        ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&addr)->sin_addr, text, sizeof text);
    else if (addr.ss_family == AF_INET6)
        ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_addr, text, sizeof text);
    return text;
}

void render_text_error(const HttpError& e, Response& res) {
    res.status = e.status();
    res.set_content(std::string(e.what()) + "\n", "text/plain; charset=utf-8");
}

// The soft limit on open files raised to the hard one; returns the soft limit now in force.
size_t raise_open_file_limit() {
    rlimit lim{};
    if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return 1024;
    if (lim.rlim_cur < lim.rlim_max) {
        lim.rlim_cur = lim.rlim_max;
        ::setrlimit(RLIMIT_NOFILE, &lim);
        ::getrlimit(RLIMIT_NOFILE, &lim);
    }
    return static_cast<size_t>(std::min<rlim_t>(lim.rlim_cur, 1 << 20));
}

}  // namespace

struct Server::Impl {
    ServerConfig cfg;
    int listen_fd = -1, epoll_fd = -1, wake_fd = -1;
    std::atomic<bool> stopping{false};
    std::atomic<size_t> open{0};                  // sockets accepted and not yet closed
    std::unordered_map<int, Waiting> waiting;     // the loop thread's
    std::mutex tasks_mu;
    std::condition_variable tasks_cv;
    std::deque<Task> tasks;                       // complete heads for the workers
    std::mutex returned_mu;
    std::vector<Returned> returned;               // connections the workers hand back
    std::vector<std::thread> workers;
    size_t worker_count = 1;
    std::atomic<size_t> busy{0};                  // workers running an exchange
    // Exchanges ended since memory was last returned, and when the last one ended (trim_when_idle).
    std::atomic<bool> freed_since_trim{false};
    std::atomic<Clock::rep> last_exchange_end{0};
    StreamSlots streams;
    std::mutex peers_mu;
    std::unordered_map<std::string, PeerCount> peers;  // by client address

    ~Impl() {
        for (int fd : {listen_fd, epoll_fd, wake_fd})
            if (fd >= 0) ::close(fd);
    }

    void wake() {
        uint64_t one = 1;
        if (wake_fd >= 0 && ::write(wake_fd, &one, sizeof one) < 0) {
            // the counter is already non-zero: the loop wakes anyway
        }
    }
    void count_peer(const std::string& peer, int connections, int in_flight) {
        std::lock_guard<std::mutex> lk(peers_mu);
        PeerCount& c = peers[peer];
        c.connections += static_cast<size_t>(connections);
        c.in_flight += static_cast<size_t>(in_flight);
        if (c.connections == 0 && c.in_flight == 0) peers.erase(peer);
    }
    void end_flight(const Connection& conn) { count_peer(conn.peer(), 0, -1); }

    void release(std::unique_ptr<Connection> conn) {
        count_peer(conn->peer(), -1, 0);
        conn.reset();
        open.fetch_sub(1);
    }

    static uint32_t events_for(Waiting::State state) { return state == Waiting::State::kWriting ? EPOLLOUT : EPOLLIN; }

    void watch(std::unique_ptr<Connection> conn, Waiting::State state, Clock::duration for_how_long,
               AfterExchange after = AfterExchange::kClose) {
        const int fd = conn->fd();
        const auto now = Clock::now();
        epoll_event ev{};
        ev.events = events_for(state);
        ev.data.fd = fd;
        if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            if (state == Waiting::State::kWriting) end_flight(*conn);
            release(std::move(conn));
            return;
        }
        waiting[fd] = Waiting{std::move(conn), state, now, now + for_how_long, 0, after};
    }

    // Moves a watched connection to `state` with a new deadline.
    void rewatch(int fd, Waiting& w, Waiting::State state, Clock::duration for_how_long) {
        if (events_for(state) != events_for(w.state)) {
            epoll_event ev{};
            ev.events = events_for(state);
            ev.data.fd = fd;
            ::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, fd, &ev);
        }
        const auto now = Clock::now();
        w.state = state;
        w.since = now;
        w.deadline = now + for_how_long;
    }

    void close_waiting(int fd) {
        auto it = waiting.find(fd);
        if (it == waiting.end()) return;
        ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
        if (it->second.state == Waiting::State::kWriting) end_flight(*it->second.conn);
        release(std::move(it->second.conn));
        waiting.erase(it);
    }

    // Why a request from `peer` is refused by the per-address limits, or "" (the health path never is).
    std::string over_peer_limit(const std::string& peer) {
        std::lock_guard<std::mutex> lk(peers_mu);
        const PeerCount& c = peers[peer];
        if (c.connections > cfg.limits.max_connections_per_address)
            return fmt::format("{} connections are open from your address, more than the {} allowed "
                               "(--max-connections-per-address); retry after {} s",
                               c.connections, cfg.limits.max_connections_per_address, cfg.limits.retry_after_s);
        if (c.in_flight >= cfg.limits.max_in_flight_per_address)
            return fmt::format("{} requests from your address are being answered, the most allowed "
                               "(--max-in-flight-per-address); retry after {} s",
                               c.in_flight, cfg.limits.retry_after_s);
        return "";
    }

    // Answers a refused head at once (never waiting on the client) and drains what it still sends.
    void refuse(Waiting& w, const HttpError& e, int retry_after_s = 0) {
        Response res;
        cfg.render_error(e, res);
        if (retry_after_s > 0) res.set_header("Retry-After", std::to_string(retry_after_s));
        w.conn->write_now(response_head(res, false) + res.body);
        w.conn->shutdown_write();
        w.conn->buffer().clear();
        w.state = Waiting::State::kDraining;
        w.deadline = Clock::now() + seconds(cfg.limits.linger_s);
    }

    // Closes the connection that has waited longest (draining ones and answers the client is slow to
    // take first, then those sending a head); false if none.
    bool evict_oldest() {
        int victim = -1;
        bool victim_drains = false;
        Clock::time_point oldest = Clock::time_point::max();
        for (const auto& [fd, w] : waiting) {
            const bool drains = w.state != Waiting::State::kHead;
            if ((drains && !victim_drains) || (drains == victim_drains && w.since < oldest)) {
                victim = fd;
                victim_drains = drains;
                oldest = w.since;
            }
        }
        if (victim < 0) return false;
        close_waiting(victim);
        return true;
    }

    void accept_all() {
        for (;;) {
            sockaddr_storage addr{};
            socklen_t len = sizeof addr;
            int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) {
                if (errno == EINTR) continue;
                if ((errno == EMFILE || errno == ENFILE) && evict_oldest()) continue;
                return;
            }
            if (open.load() >= cfg.limits.max_connections && !evict_oldest()) {
                ::close(fd);  // every open connection is at a worker: this one waits for none of them
                continue;
            }
            int one = 1;
            ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            open.fetch_add(1);
            auto conn = std::make_unique<Connection>(fd, peer_address(addr));
            count_peer(conn->peer(), 1, 0);
            watch(std::move(conn), Waiting::State::kHead, seconds(cfg.limits.head_timeout_s));
        }
    }

    // A complete head goes to a worker; a bad or oversized one is refused here.
    void try_head(int fd) {
        Waiting& w = waiting.at(fd);
        std::string& buf = w.conn->buffer();
        auto end = find_head_end(buf);
        if (!end) {
            if (buf.size() > cfg.limits.head.max_head_bytes)
                refuse(w, HttpError(431, "header_too_large",
                                    fmt::format("the request head is over {} bytes", cfg.limits.head.max_head_bytes)));
            return;
        }
        RequestHead head;
        try {
            head = parse_request_head(std::string_view(buf).substr(0, *end), cfg.limits.head);
        } catch (const HttpError& e) {
            refuse(w, e);
            return;
        }
        buf.erase(0, *end);
        if (head.path != cfg.health_path) {
            if (std::string why = over_peer_limit(w.conn->peer()); !why.empty()) {
                refuse(w, HttpError(429, "too_many_requests", why), cfg.limits.retry_after_s);
                return;
            }
        }
        {
            // Every worker is busy and the queue is full: say so now rather than let requests pile up
            // (the client retries after Retry-After; a submission with an Idempotency-Key safely).
            std::lock_guard<std::mutex> lk(tasks_mu);
            if (busy.load() >= worker_count && tasks.size() >= cfg.limits.max_queued) {
                refuse(w, HttpError(503, "overloaded",
                                    fmt::format("every request worker is busy and {} requests wait; retry after {} s",
                                                tasks.size(), cfg.limits.retry_after_s)),
                       cfg.limits.retry_after_s);
                return;
            }
        }
        // The body the head announced has not all arrived: acknowledge now, so a client holding it
        // back for our ACK (Nagle) sends it before the worker starts waiting.
        if (head.chunked || (head.content_length && buf.size() < *head.content_length)) w.conn->ack_now();
        ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
        count_peer(w.conn->peer(), 0, 1);
        Task task{std::move(w.conn), std::move(head)};
        waiting.erase(fd);
        {
            std::lock_guard<std::mutex> lk(tasks_mu);
            tasks.push_back(std::move(task));
        }
        tasks_cv.notify_one();
    }

    // Sends what the client will take of a slow answer; once all is sent, the connection goes on as
    // the exchange said (next head, drain, close).
    void on_writable(int fd, Waiting& w) {
        Connection::Flush f = w.conn->flush();
        if (f == Connection::Flush::kWouldBlock) return;
        if (f == Connection::Flush::kFailed || w.after == AfterExchange::kClose) return close_waiting(fd);
        end_flight(*w.conn);
        if (w.after == AfterExchange::kDrainAndClose) {
            w.conn->shutdown_write();
            rewatch(fd, w, Waiting::State::kDraining, seconds(cfg.limits.linger_s));
            return;
        }
        rewatch(fd, w, Waiting::State::kHead, seconds(cfg.limits.head_timeout_s));
        if (!w.conn->buffer().empty()) try_head(fd);
    }

    void on_ready(int fd) {
        auto it = waiting.find(fd);
        if (it == waiting.end()) return;
        if (it->second.state == Waiting::State::kWriting) return on_writable(fd, it->second);
        on_readable(fd);
    }

    void on_readable(int fd) {
        auto it = waiting.find(fd);
        if (it == waiting.end()) return;
        Waiting& w = it->second;
        for (int reads = 0; reads < kReadsPerWake; ++reads) {  // level-triggered: the rest comes next round
            if (w.state == Waiting::State::kHead && w.conn->buffer().size() > cfg.limits.head.max_head_bytes) break;
            Connection::Read r = w.conn->read_some(16 << 10);
            if (r == Connection::Read::kClosed) return close_waiting(fd);
            if (r == Connection::Read::kWouldBlock) break;
            if (w.state == Waiting::State::kDraining) {
                w.drained += w.conn->buffer().size();
                w.conn->buffer().clear();
                if (w.drained > kMaxDrainBytes) return close_waiting(fd);
            }
        }
        if (w.state == Waiting::State::kHead) try_head(fd);
    }

    void adopt_returned() {
        std::vector<Returned> back;
        {
            std::lock_guard<std::mutex> lk(returned_mu);
            back.swap(returned);
        }
        for (auto& r : back) {
            const int fd = r.conn->fd();
            if (r.conn->unsent() > 0) {  // the client is slow to take the answer: the loop sends the rest
                watch(std::move(r.conn), Waiting::State::kWriting, seconds(cfg.limits.response_timeout_s), r.after);
                continue;
            }
            const bool keep = r.after == AfterExchange::kKeepAlive;
            const bool pipelined = keep && !r.conn->buffer().empty();
            if (keep)
                watch(std::move(r.conn), Waiting::State::kHead, seconds(cfg.limits.head_timeout_s));
            else
                watch(std::move(r.conn), Waiting::State::kDraining, seconds(cfg.limits.linger_s));
            if (pipelined && waiting.count(fd)) try_head(fd);
        }
    }

    // Heads past their deadline get 408 (silence on an idle keep-alive connection just closes);
    // answers and drains past theirs close.
    void expire(Clock::time_point now) {
        std::vector<int> to_close;
        for (auto& [fd, w] : waiting) {
            if (now < w.deadline) continue;
            const bool idle = w.conn->buffer().find_first_not_of("\r\n") == std::string::npos;
            if (w.state == Waiting::State::kHead && !idle)
                refuse(w, HttpError(
                              408, "request_timeout",
                              fmt::format("the request head did not arrive within {} s", cfg.limits.head_timeout_s)));
            else
                to_close.push_back(fd);
        }
        for (int fd : to_close) close_waiting(fd);
    }

    void loop() {
        epoll_event events[64];
        while (!stopping.load()) {
            int n = ::epoll_wait(epoll_fd, events, 64, kLoopTickMs);
            for (int i = 0; i < n; ++i) {
                const int fd = events[i].data.fd;
                if (fd == listen_fd) {
                    accept_all();
                } else if (fd == wake_fd) {
                    uint64_t count = 0;
                    if (::read(wake_fd, &count, sizeof count) < 0) {
                        // nothing to read: another wake-up already cleared it
                    }
                } else {
                    on_ready(fd);
                }
            }
            adopt_returned();
            expire(Clock::now());
            trim_when_idle(Clock::now());
        }
    }

    // glibc returns free pages inside its arenas only on malloc_trim: what a burst of requests freed in
    // small blocks (fragments, bins, the workers' thread caches) stays resident otherwise, an amount that
    // depends on how the burst fell over the workers (20-25 MB swings in the soak). The quiet server gives it
    // back: one pass over the heap, when no exchange has run for kTrimWhenIdleAfter after some did. A worker
    // that streams an answer (a followed log, for up to an hour) is not an exchange running for this: it
    // holds one of `streams`, and the server is quiet when every busy worker is such a stream.
    void trim_when_idle(Clock::time_point now) {
        if (!freed_since_trim.load() || busy.load() > streams.used.load()) return;
        if (now - Clock::time_point(Clock::duration(last_exchange_end.load())) < kTrimWhenIdleAfter) return;
        freed_since_trim = false;
        malloc_trim(0);
    }

    void work() {
        for (;;) {
            Task task;
            {
                std::unique_lock<std::mutex> lk(tasks_mu);
                tasks_cv.wait(lk, [&] { return stopping.load() || !tasks.empty(); });
                if (stopping.load()) return;
                task = std::move(tasks.front());
                tasks.pop_front();
                busy.fetch_add(1);
            }
            AfterExchange after = AfterExchange::kClose;
            bool failed = false;
            const bool large_body =
                task.head.chunked || task.head.content_length.value_or(0) >= kTrimAfterBodyBytes;
            try {
                after = run_exchange(*task.conn, std::move(task.head), cfg.limits, cfg.handler, cfg.render_error,
                                     stopping, streams);
            } catch (const std::exception&) {
                failed = true;  // the socket failed mid-answer
            }
            last_exchange_end = Clock::now().time_since_epoch().count();
            freed_since_trim = !large_body;
            busy.fetch_sub(1);
            // glibc keeps what a thread freed in that thread's arena: the copies a large body's parse made would
            // otherwise hold each worker's arena at its high-water mark, so workers taking turns with large
            // requests grow the process by one body's worth of copies each. Returning it costs one pass over
            // the heap, after large requests only.
            if (large_body) malloc_trim(0);
            // An answer the client has not all taken stays in flight until the loop has sent it.
            const bool unsent = !failed && task.conn->unsent() > 0;
            if (!unsent) end_flight(*task.conn);
            if (failed || (after == AfterExchange::kClose && !unsent) || stopping.load()) {
                if (unsent) end_flight(*task.conn);
                release(std::move(task.conn));
                continue;
            }
            if (after == AfterExchange::kDrainAndClose && !unsent) task.conn->shutdown_write();
            {
                std::lock_guard<std::mutex> lk(returned_mu);
                returned.push_back({std::move(task.conn), after});
            }
            wake();
        }
    }
};

Server::Server(ServerConfig config) : impl_(std::make_unique<Impl>()) {
    impl_->cfg = std::move(config);
    if (!impl_->cfg.render_error) impl_->cfg.render_error = render_text_error;
    impl_->wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (impl_->wake_fd < 0) throw IoError(fmt::format("eventfd: {}", std::strerror(errno)));
}

Server::~Server() {
    stop();
}

int Server::bind() {
    Impl& m = *impl_;
    const size_t fd_limit = raise_open_file_limit();
    if (fd_limit > kReservedFds * 2)
        m.cfg.limits.max_connections = std::min(m.cfg.limits.max_connections, fd_limit - kReservedFds);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* found = nullptr;
    const std::string port = std::to_string(m.cfg.port);
    if (int rc = ::getaddrinfo(m.cfg.host.c_str(), port.c_str(), &hints, &found); rc != 0)
        throw IoError(fmt::format("cannot resolve {}: {}", m.cfg.host, ::gai_strerror(rc)));
    std::string why = "no address";
    for (addrinfo* a = found; a && m.listen_fd < 0; a = a->ai_next) {
        int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        int one = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
            m.listen_fd = fd;
        } else {
            why = std::strerror(errno);
            ::close(fd);
        }
    }
    ::freeaddrinfo(found);
    if (m.listen_fd < 0) throw IoError(fmt::format("cannot listen on {}:{}: {}", m.cfg.host, m.cfg.port, why));
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    ::getsockname(m.listen_fd, reinterpret_cast<sockaddr*>(&addr), &len);
    return addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                      : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

void Server::run() {
    Impl& m = *impl_;
    if (m.listen_fd < 0) bind();
    if (m.stopping.load()) return;
    m.epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
    if (m.epoll_fd < 0) throw IoError(fmt::format("epoll_create1: {}", std::strerror(errno)));
    for (int fd : {m.listen_fd, m.wake_fd}) {
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.fd = fd;
        ::epoll_ctl(m.epoll_fd, EPOLL_CTL_ADD, fd, &ev);
    }
    keep_large_blocks_out_of_arenas();
    m.worker_count = static_cast<size_t>(std::max(1, m.cfg.threads));
    // Streams hold their worker: by default a quarter of the workers (at least one) never stream.
    m.streams.max = m.cfg.limits.max_streams > 0
                        ? m.cfg.limits.max_streams
                        : std::max<size_t>(1, m.worker_count - std::max<size_t>(1, m.worker_count / 4));
    for (size_t i = 0; i < m.worker_count; ++i) m.workers.emplace_back([&m] { m.work(); });
    m.loop();
    // stop(): no new connections; workers finish their exchange (streams see is_writable() false).
    m.tasks_cv.notify_all();
    for (auto& t : m.workers) t.join();
    m.workers.clear();
    for (auto& t : m.tasks) m.release(std::move(t.conn));
    m.tasks.clear();
    for (auto& r : m.returned) m.release(std::move(r.conn));
    m.returned.clear();
    std::vector<int> fds;
    for (const auto& [fd, w] : m.waiting) fds.push_back(fd);
    for (int fd : fds) m.close_waiting(fd);
    ::close(m.listen_fd);
    m.listen_fd = -1;
}

void Server::stop() {
    if (!impl_) return;
    impl_->stopping.store(true);
    {
        std::lock_guard<std::mutex> lk(impl_->tasks_mu);  // a worker between its check and its wait sees it
    }
    impl_->tasks_cv.notify_all();
    impl_->wake();
}

}  // namespace llmt::server::http
