// Test support: run a real process with given stdin, capture stdout/stderr and how it ended.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace llmt::testing {

struct ProcResult {
    int exit_code = -1;    // valid when !signaled
    int signal = 0;        // the terminating signal, when signaled
    bool signaled = false;
    bool timed_out = false;
    std::string out, err;
};

// Path of the llmtrain binary under test (ctest sets LLMTRAIN_BIN).
inline std::string llmtrain_bin() {
    const char* b = std::getenv("LLMTRAIN_BIN");
    return b ? b : std::string(LLMT_BINARY_DIR) + "/llmtrain";
}

// Runs argv (argv[0] is looked up in PATH if it has no '/'), feeding `input` on stdin.
// Kills the process (SIGKILL) after timeout_s. `env` entries "K=V" are added to the environment.
inline ProcResult run_process(const std::vector<std::string>& argv, const std::string& input = "",
                              double timeout_s = 120, const std::vector<std::string>& env = {}) {
    int in[2], out[2], err[2];
    if (pipe(in) || pipe(out) || pipe(err)) throw std::runtime_error("pipe failed");
    pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        dup2(err[1], 2);
        for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) close(fd);
        for (const auto& e : env) putenv(const_cast<char*>(e.c_str()));
        std::vector<char*> args;
        for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        execvp(args[0], args.data());
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    close(err[1]);
    signal(SIGPIPE, SIG_IGN);
    fcntl(in[1], F_SETFL, O_NONBLOCK);
    ProcResult r;
    std::size_t written = 0;
    int in_fd = in[1];
    if (input.empty()) {
        close(in_fd);
        in_fd = -1;
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    bool out_open = true, err_open = true;
    while (out_open || err_open) {
        pollfd fds[3];
        int n = 0;
        if (out_open) fds[n++] = {out[0], POLLIN, 0};
        if (err_open) fds[n++] = {err[0], POLLIN, 0};
        if (in_fd >= 0) fds[n++] = {in_fd, POLLOUT, 0};
        int ms = static_cast<int>(
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now())
                .count());
        if (ms <= 0) {
            kill(pid, SIGKILL);
            r.timed_out = true;
            break;
        }
        if (poll(fds, n, ms) < 0) continue;
        for (int i = 0; i < n; ++i) {
            if (!fds[i].revents) continue;
            if (fds[i].fd == in_fd) {
                ssize_t w = write(in_fd, input.data() + written, input.size() - written);
                if (w > 0) written += static_cast<std::size_t>(w);
                if (w < 0 || written == input.size()) {
                    close(in_fd);
                    in_fd = -1;
                }
                continue;
            }
            char buf[65536];
            ssize_t k = read(fds[i].fd, buf, sizeof buf);
            if (k <= 0) {
                if (fds[i].fd == out[0]) out_open = false;
                else err_open = false;
            } else {
                (fds[i].fd == out[0] ? r.out : r.err).append(buf, static_cast<std::size_t>(k));
            }
        }
    }
    if (in_fd >= 0) close(in_fd);
    close(out[0]);
    close(err[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) {
        r.signaled = true;
        r.signal = WTERMSIG(status);
    } else {
        r.exit_code = WEXITSTATUS(status);
    }
    return r;
}

}  // namespace llmt::testing
