// Test worker for the launcher (tests/launch): proves that every rank reaches rank 0 over TCP at
// MASTER_ADDR:MASTER_PORT, resolved by name as the workers of a real job would.
// Rank 0 listens on MASTER_PORT and answers WORLD_SIZE-1 hellos; other ranks connect (retrying until rank 0
// listens), say hello and print rank 0's answer. Exit 0 on success, 1 on any failure (message on stderr).
// Timeout: TCP_PING_TIMEOUT_S (default 30) seconds for the whole exchange.
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(const std::string& msg) {
    std::fprintf(stderr, "tcp_ping: %s\n", msg.c_str());
    std::exit(1);
}

std::string env_or_fail(const char* name) {
    const char* v = std::getenv(name);
    if (!v || !*v) fail(std::string(name) + " is not set");
    return v;
}

std::string host_name() {
    char buf[256] = {};
    gethostname(buf, sizeof buf - 1);
    return buf;
}

// Reads one '\n'-terminated line (without it) before the deadline.
std::string read_line(int fd, Clock::time_point deadline) {
    std::string line;
    for (;;) {
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (ms <= 0) fail("timed out reading a line");
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, static_cast<int>(ms)) <= 0) continue;
        char c;
        ssize_t k = read(fd, &c, 1);
        if (k <= 0) fail("connection closed before a full line");
        if (c == '\n') return line;
        line += c;
    }
}

void write_line(int fd, const std::string& s) {
    std::string msg = s + "\n";
    if (write(fd, msg.data(), msg.size()) != static_cast<ssize_t>(msg.size())) fail("write failed");
}

}  // namespace

int main() {
    const int rank = std::atoi(env_or_fail("RANK").c_str());
    const int world = std::atoi(env_or_fail("WORLD_SIZE").c_str());
    const std::string addr = env_or_fail("MASTER_ADDR");
    const std::string port = env_or_fail("MASTER_PORT");
    const char* t = std::getenv("TCP_PING_TIMEOUT_S");
    const auto deadline = Clock::now() + std::chrono::seconds(t ? std::atoi(t) : 30);
    const std::string me = host_name();
    std::printf("rank %d of %d on %s, master %s:%s\n", rank, world, me.c_str(), addr.c_str(), port.c_str());
    std::fflush(stdout);

    if (rank == 0) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_port = htons(static_cast<uint16_t>(std::atoi(port.c_str())));
        sa.sin_addr.s_addr = htonl(INADDR_ANY);
        if (bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || listen(s, 64) != 0) {
            fail("cannot listen on port " + port + ": " + std::strerror(errno));
        }
        for (int i = 1; i < world; ++i) {
            auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
            pollfd p{s, POLLIN, 0};
            if (ms <= 0 || poll(&p, 1, static_cast<int>(ms)) <= 0) fail("timed out waiting for the other ranks");
            int c = accept(s, nullptr, nullptr);
            if (c < 0) fail(std::string("accept: ") + std::strerror(errno));
            std::string hello = read_line(c, deadline);
            std::printf("rank 0 got: %s\n", hello.c_str());
            write_line(c, "ack from rank 0 on " + me);
            close(c);
        }
        close(s);
        return 0;
    }

    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    std::string last_error;
    while (Clock::now() < deadline) {
        addrinfo* res = nullptr;
        int g = getaddrinfo(addr.c_str(), port.c_str(), &hints, &res);
        if (g != 0) {
            last_error = std::string("resolve ") + addr + ": " + gai_strerror(g);
        } else {
            int s = socket(res->ai_family, res->ai_socktype, 0);
            if (connect(s, res->ai_addr, res->ai_addrlen) == 0) {
                char ip[64] = {};
                getnameinfo(res->ai_addr, res->ai_addrlen, ip, sizeof ip, nullptr, 0, NI_NUMERICHOST);
                freeaddrinfo(res);
                write_line(s, "hello from rank " + std::to_string(rank) + " on " + me);
                std::string ack = read_line(s, deadline);
                std::printf("rank %d reached %s (%s): %s\n", rank, addr.c_str(), ip, ack.c_str());
                close(s);
                return 0;
            }
            last_error = "connect " + addr + ":" + port + ": " + std::strerror(errno);
            close(s);
            freeaddrinfo(res);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    fail("timed out; last error: " + last_error);
}
