// Test support for the dist layer: run one function per rank in its own forked process (real
// processes, real sockets), collect how each ended and the message of what it threw.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <typeinfo>
#include <vector>

#include "core/error.h"
#include "distributed/tcp_store.h"
#include "support/free_port.h"

namespace llmt::testing {

struct ChildResult {
    bool ok = false;         // fn returned
    bool signaled = false;   // killed by a signal (signal below)
    int signal = 0;
    bool timed_out = false;  // the parent killed it after the deadline
    std::string error_type;  // "DistTimeout", "DistError", ... when fn threw
    std::string message;     // what fn reported, then what() of the exception it threw
    double end_time = 0;     // CLOCK_REALTIME seconds when fn returned or threw
};

inline double wall_now() {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Serves a TcpStore (its server thread) from a forked process, so that the gtest process stays
// single-threaded when it forks the ranks: a child forked while another thread holds a lock (the
// malloc or ASan allocator lock, gloo's) inherits it held and deadlocks. Parent-side reads go
// through a client (`client()`), which starts no thread. The host dies with the test process.
class StoreHost {
public:
    StoreHost(int world_size, std::chrono::milliseconds timeout) {
        int p[2];
        if (pipe(p) != 0) throw std::runtime_error("StoreHost: pipe failed");
        pid_ = fork();
        if (pid_ < 0) throw std::runtime_error("StoreHost: fork failed");
        if (pid_ == 0) {
            close(p[0]);
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            int port = -1;
            try {
                dist::TcpStore server("127.0.0.1", 0, true, world_size, timeout);
                port = server.port();
                (void)!write(p[1], &port, sizeof port);
                close(p[1]);
                for (;;) pause();  // until the parent kills it
            } catch (...) {
                (void)!write(p[1], &port, sizeof port);
                _exit(1);
            }
        }
        close(p[1]);
        ssize_t n = read(p[0], &port_, sizeof port_);
        close(p[0]);
        if (n != sizeof port_ || port_ <= 0) {
            stop();
            throw std::runtime_error("StoreHost: the store server did not start");
        }
    }
    ~StoreHost() { stop(); }
    StoreHost(const StoreHost&) = delete;
    StoreHost& operator=(const StoreHost&) = delete;

    int port() const { return port_; }
    // A client of the hosted store, for checks in the parent after the ranks are done.
    std::unique_ptr<dist::TcpStore> client(int world_size, std::chrono::milliseconds timeout) const {
        return std::make_unique<dist::TcpStore>("127.0.0.1", port_, false, world_size, timeout);
    }

private:
    void stop() {
        if (pid_ > 0) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
            pid_ = -1;
        }
    }
    pid_t pid_ = -1;
    int port_ = -1;
};

// A flag one process raises and another waits for, across fork(): a file in the temp directory named
// after `name` and the process that made the object. Made (and cleared) in the parent before the
// children fork; removed when the parent's object goes (children leave by _exit, running no destructors).
class FileFlag {
public:
    explicit FileFlag(const std::string& name)
        : path_(std::filesystem::temp_directory_path() / (name + "_" + std::to_string(getpid()))) {
        std::filesystem::remove(path_);
    }
    ~FileFlag() {
        std::error_code ec;
        std::filesystem::remove(path_, ec);
    }
    FileFlag(const FileFlag&) = delete;
    FileFlag& operator=(const FileFlag&) = delete;

    void raise() const {
        if (FILE* f = fopen(path_.c_str(), "w")) fclose(f);
    }
    bool raised() const { return std::filesystem::exists(path_); }
    // Polls every 10 ms, at most `timeout` / 10 ms times; whether the flag is up.
    bool wait(std::chrono::milliseconds timeout) const {
        for (auto i = timeout.count() / 10; i > 0 && !raised(); --i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return raised();
    }

private:
    std::filesystem::path path_;
};

// fn(report) runs in a child; report(s) appends to the child's message (for values the parent checks).
using ChildFn = std::function<void(const std::function<void(const std::string&)>& report)>;

// Forks every fn (in order, the gtest process itself stays single-threaded), then calls
// `while_running(pids)` in the parent, then waits up to timeout_s for all and SIGKILLs the rest.
inline std::vector<ChildResult> run_children(
    const std::vector<ChildFn>& fns, double timeout_s,
    const std::function<void(const std::vector<pid_t>&)>& while_running = {}) {
    std::vector<pid_t> pids;
    std::vector<int> fds;
    for (const auto& fn : fns) {
        int p[2];
        if (pipe(p) != 0) throw std::runtime_error("pipe failed");
        pid_t pid = fork();
        if (pid < 0) throw std::runtime_error("fork failed");
        if (pid == 0) {
            close(p[0]);
            std::string out;
            auto report = [&](const std::string& s) { out += s; };
            int code = 0;
            try {
                fn(report);
                out = "OK\n" + out;
            } catch (const DistTimeout& e) {
                out = std::string("DistTimeout\n") + out + e.what();
                code = 1;
            } catch (const DistError& e) {
                out = std::string("DistError\n") + out + e.what();
                code = 1;
            } catch (const InputError& e) {
                out = std::string("InputError\n") + out + e.what();
                code = 1;
            } catch (const std::exception& e) {
                out = std::string("std::exception\n") + out + e.what();
                code = 1;
            }
            out = std::to_string(wall_now()) + "\n" + out;
            size_t done = 0;
            while (done < out.size()) {
                ssize_t n = write(p[1], out.data() + done, out.size() - done);
                if (n <= 0) break;
                done += static_cast<size_t>(n);
            }
            _exit(code);
        }
        close(p[1]);
        pids.push_back(pid);
        fds.push_back(p[0]);
    }
    if (while_running) while_running(pids);

    std::vector<ChildResult> results(fns.size());
    std::vector<std::string> outs(fns.size());
    std::vector<bool> open(fns.size(), true);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    bool killed = false;
    for (;;) {
        std::vector<pollfd> p;
        std::vector<size_t> idx;
        for (size_t i = 0; i < fds.size(); ++i) {
            if (open[i]) {
                p.push_back({fds[i], POLLIN, 0});
                idx.push_back(i);
            }
        }
        if (p.empty()) break;
        auto ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
        if (ms <= 0) {
            for (size_t i = 0; i < pids.size(); ++i) {
                if (open[i]) {
                    kill(pids[i], SIGKILL);
                    results[i].timed_out = true;
                }
            }
            killed = true;
            break;
        }
        if (poll(p.data(), p.size(), static_cast<int>(ms)) <= 0) continue;
        for (size_t k = 0; k < p.size(); ++k) {
            if (!p[k].revents) continue;
            char buf[4096];
            ssize_t n = read(p[k].fd, buf, sizeof buf);
            if (n > 0) {
                outs[idx[k]].append(buf, static_cast<size_t>(n));
            } else {
                open[idx[k]] = false;
            }
        }
    }
    (void)killed;
    for (size_t i = 0; i < pids.size(); ++i) {
        int status = 0;
        waitpid(pids[i], &status, 0);
        close(fds[i]);
        auto& r = results[i];
        if (WIFSIGNALED(status)) {
            r.signaled = true;
            r.signal = WTERMSIG(status);
        }
        const std::string& o = outs[i];
        size_t a = o.find('\n');
        if (a == std::string::npos) continue;
        r.end_time = std::stod(o.substr(0, a));
        size_t b = o.find('\n', a + 1);
        std::string kind = o.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1);
        r.message = b == std::string::npos ? "" : o.substr(b + 1);
        r.ok = kind == "OK";
        if (!r.ok) r.error_type = kind;
    }
    return results;
}

// "rank 1: DistError: <message>" lines, for failure output.
inline std::string describe(const std::vector<ChildResult>& rs) {
    std::string s;
    for (size_t i = 0; i < rs.size(); ++i) {
        const auto& r = rs[i];
        s += "child " + std::to_string(i) + ": ";
        if (r.timed_out) s += "[killed at the test deadline] ";
        if (r.signaled) s += "[signal " + std::to_string(r.signal) + "] ";
        s += r.ok ? "ok " : r.error_type + ": ";
        s += r.message + "\n";
    }
    return s;
}

}  // namespace llmt::testing
