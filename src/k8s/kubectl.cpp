// See kubectl.h. Child processes: fork + execvp with pipes, drained with poll so neither stdout nor
// stderr can fill up and block kubectl. Exit code 127 from the child means exec failed (not found).
#include "k8s/kubectl.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace llmt::k8s {

namespace {

struct Child {
    pid_t pid = -1;
    int in = -1, out = -1, err = -1;
};

Child spawn(const std::vector<std::string>& argv, bool want_stdin) {
    int in[2] = {-1, -1}, out[2], err[2];
    if ((want_stdin && pipe2(in, O_CLOEXEC)) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC))
        throw IoError(fmt::format("pipe: {}", std::strerror(errno)));
    pid_t pid = fork();
    if (pid < 0) throw IoError(fmt::format("fork: {}", std::strerror(errno)));
    if (pid == 0) {
        if (want_stdin) {
            dup2(in[0], 0);
        } else {
            int devnull = open("/dev/null", O_RDONLY);
            if (devnull >= 0) dup2(devnull, 0);
        }
        dup2(out[1], 1);
        dup2(err[1], 2);
        std::vector<char*> args;
        for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        execvp(args[0], args.data());
        std::string msg = fmt::format("cannot run {}: {}\n", argv[0], std::strerror(errno));
        ssize_t ignored = write(2, msg.data(), msg.size());
        (void)ignored;
        _exit(127);
    }
    Child c;
    c.pid = pid;
    if (want_stdin) {
        close(in[0]);
        c.in = in[1];
        fcntl(c.in, F_SETFL, O_NONBLOCK);
    }
    close(out[1]);
    close(err[1]);
    c.out = out[0];
    c.err = err[0];
    return c;
}

int wait_exit(pid_t pid) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) return 1;
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return 1;
}

// Ignores SIGPIPE while writing to a child's stdin (a kubectl that exits early must not kill us).
struct IgnoreSigpipe {
    struct sigaction old {};
    IgnoreSigpipe() {
        struct sigaction sa {};
        sa.sa_handler = SIG_IGN;
        sigaction(SIGPIPE, &sa, &old);
    }
    ~IgnoreSigpipe() { sigaction(SIGPIPE, &old, nullptr); }
};

}  // namespace

std::string format_command(const std::vector<std::string>& argv) {
    std::string s;
    for (const auto& a : argv) {
        if (!s.empty()) s += ' ';
        if (a.empty() || a.find_first_of(" \t\n'\"$") != std::string::npos) {
            s += '\'';
            for (char c : a) s += c == '\'' ? std::string("'\\''") : std::string(1, c);
            s += '\'';
        } else {
            s += a;
        }
    }
    return s;
}

Kubectl::Kubectl(std::string namespace_, std::string context)
    : ns_(std::move(namespace_)), context_(std::move(context)) {
    const char* b = std::getenv("KUBECTL");
    bin_ = b && *b ? b : "kubectl";
}

std::vector<std::string> Kubectl::argv(const std::vector<std::string>& args) const {
    std::vector<std::string> a = {bin_};
    if (!context_.empty()) a.insert(a.end(), {"--context", context_});
    if (!ns_.empty()) a.insert(a.end(), {"--namespace", ns_});
    a.insert(a.end(), args.begin(), args.end());
    return a;
}

KubectlResult Kubectl::run(const std::vector<std::string>& args, const std::string& input) const {
    IgnoreSigpipe guard;
    const auto full = argv(args);
    Child c = spawn(full, true);
    KubectlResult r;
    std::size_t written = 0;
    if (input.empty()) {
        close(c.in);
        c.in = -1;
    }
    bool out_open = true, err_open = true;
    char buf[65536];
    while (out_open || err_open) {
        pollfd fds[3];
        int n = 0;
        if (out_open) fds[n++] = {c.out, POLLIN, 0};
        if (err_open) fds[n++] = {c.err, POLLIN, 0};
        if (c.in >= 0) fds[n++] = {c.in, POLLOUT, 0};
        if (poll(fds, n, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int i = 0; i < n; ++i) {
            if (!fds[i].revents) continue;
            if (fds[i].fd == c.in) {
                ssize_t w = write(c.in, input.data() + written, input.size() - written);
                if (w > 0) written += static_cast<std::size_t>(w);
                if (w < 0 && errno != EAGAIN && errno != EINTR) written = input.size();  // child closed stdin
                if (written == input.size()) {
                    close(c.in);
                    c.in = -1;
                }
                continue;
            }
            ssize_t got = read(fds[i].fd, buf, sizeof buf);
            if (got > 0) {
                (fds[i].fd == c.out ? r.out : r.err).append(buf, static_cast<std::size_t>(got));
            } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
                if (fds[i].fd == c.out) out_open = false;
                else err_open = false;
            }
        }
    }
    if (c.in >= 0) close(c.in);
    close(c.out);
    close(c.err);
    r.exit_code = wait_exit(c.pid);
    return r;
}

std::string Kubectl::check(const std::vector<std::string>& args, const std::string& input) const {
    KubectlResult r = run(args, input);
    if (r.exit_code != 0) {
        std::string err = r.err;
        while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
        throw KubectlError(fmt::format("`{}` failed with exit code {}{}{}", format_command(argv(args)), r.exit_code,
                                       err.empty() ? "" : ":\n", err),
                           r.exit_code);
    }
    return r.out;
}

int Kubectl::stream_prefixed(const std::vector<std::pair<std::string, std::vector<std::string>>>& commands,
                             std::FILE* out) const {
    struct Stream {
        int fd;
        std::size_t cmd;
        std::string pending;
    };
    std::vector<Child> children;
    std::vector<Stream> streams;
    for (std::size_t i = 0; i < commands.size(); ++i) {
        children.push_back(spawn(argv(commands[i].second), false));
        streams.push_back({children.back().out, i, {}});
        streams.push_back({children.back().err, i, {}});
    }
    auto emit_lines = [&](Stream& s, bool flush_all) {
        std::size_t start = 0, nl;
        while ((nl = s.pending.find('\n', start)) != std::string::npos) {
            fmt::print(out, "{}{}\n", commands[s.cmd].first, std::string_view(s.pending).substr(start, nl - start));
            start = nl + 1;
        }
        s.pending.erase(0, start);
        if (flush_all && !s.pending.empty()) {
            fmt::print(out, "{}{}\n", commands[s.cmd].first, s.pending);
            s.pending.clear();
        }
        std::fflush(out);
    };
    char buf[65536];
    std::size_t open_count = streams.size();
    while (open_count > 0) {
        std::vector<pollfd> fds;
        std::vector<std::size_t> which;
        for (std::size_t i = 0; i < streams.size(); ++i)
            if (streams[i].fd >= 0) {
                fds.push_back({streams[i].fd, POLLIN, 0});
                which.push_back(i);
            }
        if (poll(fds.data(), fds.size(), -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (std::size_t k = 0; k < fds.size(); ++k) {
            if (!fds[k].revents) continue;
            Stream& s = streams[which[k]];
            ssize_t got = read(s.fd, buf, sizeof buf);
            if (got > 0) {
                s.pending.append(buf, static_cast<std::size_t>(got));
                emit_lines(s, false);
            } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
                emit_lines(s, true);
                close(s.fd);
                s.fd = -1;
                --open_count;
            }
        }
    }
    int first_bad = 0;
    for (const auto& c : children) {
        int code = wait_exit(c.pid);
        if (code != 0 && first_bad == 0) first_bad = code;
    }
    return first_bad;
}

}  // namespace llmt::k8s
