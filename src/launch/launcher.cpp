// The worker launcher (launcher.h). One thread, one poll() loop over the workers' output pipes and a
// self-pipe fed by the SIGTERM/SIGINT/SIGCHLD handlers (handlers, not signalfd: threads that library
// constructors started before main, e.g. OpenBLAS's pool, do not block signals, so only a handler sees
// every delivery). Each worker leads its own process group so that one killpg reaches its children too;
// the launcher is a child subreaper, so even a descendant that left its group is reparented here and killed.
#include "launch/launcher.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "core/error.h"
#include "launch/error_file.h"
#include "launch/worker_logs.h"

extern char** environ;

namespace llmt::launch {
namespace {

using Clock = std::chrono::steady_clock;

int g_sig_pipe[2] = {-1, -1};
constexpr int kBadInputExitCode = 2;  // cli/main.cpp: InputError and its subclasses

void on_signal(int sig) {
    int saved = errno;
    unsigned char b = static_cast<unsigned char>(sig);
    [[maybe_unused]] ssize_t w = write(g_sig_pipe[1], &b, 1);  // a full pipe already holds a wake-up
    errno = saved;
}

// Installs the handlers for the lifetime of the object and restores the previous ones after.
class SignalScope {
public:
    SignalScope() {
        if (pipe2(g_sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
            throw IoError(fmt::format("pipe: {}", std::strerror(errno)));
        struct sigaction sa {};
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART;
        for (int s : {SIGTERM, SIGINT}) sigaction(s, &sa, &old_[s]);
        sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
        sigaction(SIGCHLD, &sa, &old_[SIGCHLD]);
        struct sigaction ign {};
        ign.sa_handler = SIG_IGN;
        sigaction(SIGPIPE, &ign, &old_[SIGPIPE]);  // a closed stdout must not kill the launcher
        sigset_t set;
        sigemptyset(&set);
        for (int s : {SIGTERM, SIGINT, SIGCHLD}) sigaddset(&set, s);
        pthread_sigmask(SIG_UNBLOCK, &set, &old_mask_);
    }
    ~SignalScope() {
        for (auto& [s, a] : old_) sigaction(s, &a, nullptr);
        pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
        close(g_sig_pipe[0]);
        close(g_sig_pipe[1]);
        g_sig_pipe[0] = g_sig_pipe[1] = -1;
    }
    SignalScope(const SignalScope&) = delete;
    SignalScope& operator=(const SignalScope&) = delete;

private:
    std::map<int, struct sigaction> old_;
    sigset_t old_mask_{};
};

void write_all(int fd, const std::string& s) {
    std::size_t off = 0;
    while (off < s.size()) {
        ssize_t w = write(fd, s.data() + off, s.size() - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;  // EPIPE and the like: the reader is gone; keep supervising the workers
        off += static_cast<std::size_t>(w);
    }
}

void log_line(const std::string& msg) { write_all(2, "llmtrain launch: " + msg + "\n"); }

// One output stream of one worker, relayed line by line with a prefix.
struct Stream {
    int fd = -1;       // read end, -1 once at EOF
    int out_fd = 1;    // where the prefixed lines go; -1 = not to the console (--redirects without --tee)
    int file_fd = -1;  // the worker's stdout.log/stderr.log (--redirects, --tee): raw bytes, no prefix
    std::string buf;   // the unfinished line
};

struct Worker {
    int local_rank = 0, rank = 0;
    pid_t pid = -1;
    bool running = false;
    int exit_code = 0;  // 128 + signal for a signal
    std::time_t exited_at = 0;
    Stream out, err;
};

// Lines longer than this are cut, so that a worker printing without newlines cannot grow our memory.
constexpr std::size_t kMaxLine = 64 * 1024;

void relay(Stream& s, const std::string& prefix, bool eof) {
    std::size_t start = 0;
    std::string batch;
    for (;;) {
        std::size_t nl = s.buf.find('\n', start);
        if (nl == std::string::npos) break;
        batch += prefix;
        batch.append(s.buf, start, nl + 1 - start);
        start = nl + 1;
    }
    s.buf.erase(0, start);
    if (!s.buf.empty() && (eof || s.buf.size() >= kMaxLine)) {
        batch += prefix + s.buf + "\n";
        s.buf.clear();
    }
    // One write per batch of whole lines: no other writer in this process can split a line.
    if (!batch.empty() && s.out_fd >= 0) write_all(s.out_fd, batch);
}

// Reads what is available; closes the stream at EOF.
void pump(Stream& s, const std::string& prefix) {
    char chunk[65536];
    for (;;) {
        ssize_t k = read(s.fd, chunk, sizeof chunk);
        if (k > 0) {
            if (s.file_fd >= 0) write_all(s.file_fd, std::string(chunk, static_cast<std::size_t>(k)));
            s.buf.append(chunk, static_cast<std::size_t>(k));
            relay(s, prefix, false);
            if (static_cast<std::size_t>(k) < sizeof chunk) return;
            continue;
        }
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        relay(s, prefix, true);  // EOF or a read error
        close(s.fd);
        s.fd = -1;
        if (s.file_fd >= 0) close(s.file_fd);
        s.file_fd = -1;
        return;
    }
}

int status_to_code(int status) {
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return 1;
}

// Every live descendant of this process (from /proc's parent links), children first.
std::vector<pid_t> descendants() {
    std::map<pid_t, std::vector<pid_t>> children;
    DIR* d = opendir("/proc");
    if (!d) return {};
    while (dirent* e = readdir(d)) {
        char* end = nullptr;
        long pid = std::strtol(e->d_name, &end, 10);
        if (*end != '\0' || pid <= 0) continue;
        std::string stat;
        char buf[512];
        int fd = open(fmt::format("/proc/{}/stat", pid).c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t k = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (k <= 0) continue;
        stat.assign(buf, static_cast<std::size_t>(k));
        // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so parse after the last ')'.
        auto rp = stat.rfind(')');
        if (rp == std::string::npos || rp + 4 >= stat.size()) continue;
        long ppid = std::strtol(stat.c_str() + rp + 4, nullptr, 10);
        children[static_cast<pid_t>(ppid)].push_back(static_cast<pid_t>(pid));
    }
    closedir(d);
    std::vector<pid_t> out, frontier{getpid()};
    while (!frontier.empty()) {
        pid_t p = frontier.back();
        frontier.pop_back();
        for (pid_t c : children[p]) {
            out.push_back(c);
            frontier.push_back(c);
        }
    }
    return out;
}

bool is_loopback(const std::string& addr) {
    return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1";
}

// Builds the environment block for a worker from ours plus the changes.
std::vector<std::string> make_env(const std::vector<std::pair<std::string, std::string>>& changes) {
    std::set<std::string> names;
    for (const auto& [k, v] : changes) names.insert(k);
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
        std::string s(*e);
        if (!names.count(s.substr(0, s.find('=')))) env.push_back(std::move(s));
    }
    for (const auto& [k, v] : changes) {
        if (!v.empty()) env.push_back(k + "=" + v);
    }
    return env;
}

class Attempt {
public:
    Attempt(const LaunchOptions& opt, const WorkerGroupEnv& group, const WorkerLogs& logs, int restart_count,
            int master_port)
        : opt_(opt), group_(group), logs_(logs), restart_count_(restart_count), master_port_(master_port) {}

    ~Attempt() {
        // Reached with workers alive only on an exception; leave nothing behind.
        for (auto& w : workers_) {
            if (w.running) killpg(w.pid, SIGKILL);
        }
        kill_descendants();
        for (auto& w : workers_) {
            for (Stream* s : {&w.out, &w.err}) {
                if (s->fd >= 0) close(s->fd);
                if (s->file_fd >= 0) close(s->file_fd);
            }
        }
    }

    struct Outcome {
        int first_failure_code = 0;  // 0 = every worker exited 0
        int first_failure_rank = -1;
        std::vector<WorkerFailure> failures;  // every worker that failed before the teardown, in exit order
        int stop_signal = 0;         // a SIGTERM/SIGINT the launcher received
    };

    Outcome run() {
        spawn_all();
        loop();
        return outcome_;
    }

private:
    void spawn_all() {
        auto args = worker_args_for_attempt(opt_, restart_count_);
        const std::string program = opt_.exec_program ? *opt_.exec_program : std::string("/proc/self/exe");
        std::vector<std::string> argv;
        argv.push_back(opt_.exec_program ? *opt_.exec_program : opt_.argv0);
        argv.insert(argv.end(), args.begin(), args.end());
        const int n = opt_.node.nproc_per_node.value;
        logs_.prepare_attempt(restart_count_, n);
        workers_.resize(static_cast<std::size_t>(n));
        for (int lr = 0; lr < n; ++lr) {
            Worker& w = workers_[static_cast<std::size_t>(lr)];
            w.local_rank = lr;
            w.rank = opt_.node.first_rank() + lr;
            spawn(w, program, argv);
        }
    }

    void spawn(Worker& w, const std::string& program, const std::vector<std::string>& argv) {
        WorkerSlot slot{w.local_rank, master_port_, restart_count_, logs_.error_file(restart_count_, w.local_rank)};
        auto env = make_env(worker_env(opt_.node, group_, slot));
        const int to_files = std_bits(opt_.redirects, w.local_rank) | std_bits(opt_.tee, w.local_rank);
        const int to_console = ~std_bits(opt_.redirects, w.local_rank) | std_bits(opt_.tee, w.local_rank);
        int out_file = (to_files & kStdOut) ? open_log(logs_.stdout_file(restart_count_, w.local_rank)) : -1;
        int err_file = (to_files & kStdErr) ? open_log(logs_.stderr_file(restart_count_, w.local_rank)) : -1;
        std::vector<char*> cargv, cenv;
        for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
        cargv.push_back(nullptr);
        for (const auto& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
        cenv.push_back(nullptr);

        int out[2], err[2];
        if (pipe2(out, O_CLOEXEC) != 0) throw IoError(fmt::format("pipe: {}", std::strerror(errno)));
        if (pipe2(err, O_CLOEXEC) != 0) {
            close(out[0]);
            close(out[1]);
            throw IoError(fmt::format("pipe: {}", std::strerror(errno)));
        }
        const pid_t parent = getpid();
        const bool path_lookup = opt_.exec_program.has_value();
        pid_t pid = fork();
        if (pid < 0) {
            for (int fd : {out[0], out[1], err[0], err[1], out_file, err_file}) {
                if (fd >= 0) close(fd);
            }
            throw IoError(fmt::format("fork: {}", std::strerror(errno)));
        }
        if (pid == 0) {
            // Child: only async-signal-safe calls from here to exec (other threads may hold locks).
            setpgid(0, 0);
            prctl(PR_SET_PDEATHSIG, SIGKILL);  // the launcher killed by SIGKILL takes its workers along
            if (getppid() != parent) _exit(137);
            struct sigaction dfl {};
            dfl.sa_handler = SIG_DFL;
            for (int s : {SIGTERM, SIGINT, SIGCHLD, SIGPIPE}) sigaction(s, &dfl, nullptr);
            sigset_t none;
            sigemptyset(&none);
            sigprocmask(SIG_SETMASK, &none, nullptr);
            int devnull = open("/dev/null", O_RDONLY);
            if (devnull >= 0) dup2(devnull, 0);
            dup2(out[1], 1);
            dup2(err[1], 2);
            if (path_lookup) {
                execvpe(cargv[0], cargv.data(), cenv.data());
            } else {
                execve(program.c_str(), cargv.data(), cenv.data());
            }
            const char* what = strerror(errno);
            const char* msg[] = {"llmtrain launch: cannot run '", cargv[0], "': ", what, "\n"};
            for (const char* m : msg) {
                [[maybe_unused]] ssize_t r = write(2, m, strlen(m));
            }
            _exit(127);
        }
        setpgid(pid, pid);  // also here, so a killpg right after fork cannot miss the group
        close(out[1]);
        close(err[1]);
        fcntl(out[0], F_SETFL, O_NONBLOCK);
        fcntl(err[0], F_SETFL, O_NONBLOCK);
        w.pid = pid;
        w.running = true;
        w.out = Stream{out[0], (to_console & kStdOut) ? 1 : -1, out_file, {}};
        w.err = Stream{err[0], (to_console & kStdErr) ? 2 : -1, err_file, {}};
    }

    static int std_bits(const std::vector<int>& per_rank, int local_rank) {
        return local_rank < static_cast<int>(per_rank.size()) ? per_rank[static_cast<std::size_t>(local_rank)] : 0;
    }

    static int open_log(const std::string& path) {
        int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) throw IoError(fmt::format("cannot create {}: {}", path, std::strerror(errno)));
        return fd;
    }

    int running_count() const {
        return static_cast<int>(
            std::count_if(workers_.begin(), workers_.end(), [](const Worker& w) { return w.running; }));
    }

    void signal_all(int sig) {
        for (auto& w : workers_) {
            if (w.running) killpg(w.pid, sig);
        }
    }

    // Tears the group down: SIGTERM now, SIGKILL after the grace period.
    void terminate_all(int sig) {
        signal_all(sig);
        kill_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double>(opt_.kill_grace_s));
    }

    void kill_descendants() {
        // Two passes: a process forking while we scan is caught by the second.
        for (int pass = 0; pass < 2; ++pass) {
            auto pids = descendants();
            if (pids.empty()) return;
            for (pid_t p : pids) kill(p, SIGKILL);
            for (pid_t p : pids) waitpid(p, nullptr, 0);  // only our children can be reaped; others return ECHILD
        }
        reap();
    }

    void on_exit(Worker& w, int code) {
        w.running = false;
        w.exit_code = code;
        w.exited_at = std::time(nullptr);
        if (code == 0) return;
        if (outcome_.first_failure_rank < 0) {
            outcome_.first_failure_code = code;
            outcome_.first_failure_rank = w.rank;
        }
        // Workers that the teardown's SIGTERM ended are its doing, not failures of their own.
        if (!tearing_down_ || (code != 128 + SIGTERM && code != 128 + SIGKILL)) {
            outcome_.failures.push_back(WorkerFailure{w.rank, w.local_rank, w.pid, code, w.exited_at,
                                                      logs_.error_file(restart_count_, w.local_rank)});
        }
        if (!tearing_down_) {
            tearing_down_ = true;
            int others = running_count();
            log_line(fmt::format("worker rank {} (pid {}) failed with {}{}", w.rank, w.pid, describe_exit_code(code),
                                 others
                                     ? fmt::format("; stopping the other {} worker(s) (SIGTERM, SIGKILL after {} s)",
                                                   others, opt_.kill_grace_s)
                                     : std::string()));
            terminate_all(SIGTERM);
        }
    }

    // Reaps every exited child. A worker's group is killed before the worker is reaped, while its pid
    // still names the group (after the reap the pid could be reused).
    void reap() {
        for (;;) {
            siginfo_t info{};
            if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) return;
            pid_t pid = info.si_pid;
            auto it = std::find_if(workers_.begin(), workers_.end(),
                                   [pid](const Worker& w) { return w.running && w.pid == pid; });
            if (it != workers_.end()) killpg(pid, SIGKILL);
            int status = 0;
            if (waitpid(pid, &status, 0) < 0) return;
            if (it != workers_.end()) on_exit(*it, status_to_code(status));
        }
    }

    void on_launcher_signal(int sig) {
        if (outcome_.stop_signal == 0) {
            outcome_.stop_signal = sig;
            tearing_down_ = true;
            log_line(
                fmt::format("received SIG{}; forwarding it to {} worker(s) (SIGKILL after {} s or on a second signal)",
                            sigabbrev_np(sig), running_count(), opt_.kill_grace_s));
            terminate_all(sig);
        } else {
            log_line(fmt::format("received SIG{} again; killing the workers", sigabbrev_np(sig)));
            signal_all(SIGKILL);
        }
    }

    void loop() {
        std::optional<Clock::time_point> drain_deadline;
        for (;;) {
            reap();
            if (running_count() == 0) {
                // Descendants that outlived their worker still hold the pipes open; they go now.
                if (!drain_deadline) {
                    kill_descendants();
                    drain_deadline = Clock::now() + std::chrono::seconds(5);
                }
            }
            std::vector<pollfd> fds;
            std::vector<std::pair<Stream*, int>> owners;  // stream, rank
            fds.push_back({g_sig_pipe[0], POLLIN, 0});
            for (auto& w : workers_) {
                for (Stream* s : {&w.out, &w.err}) {
                    if (s->fd >= 0) {
                        fds.push_back({s->fd, POLLIN, 0});
                        owners.emplace_back(s, w.rank);
                    }
                }
            }
            if (running_count() == 0 && (owners.empty() || Clock::now() >= *drain_deadline)) return;

            int timeout_ms = -1;
            auto now = Clock::now();
            auto until = [&](Clock::time_point t) {
                auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - now).count() + 1;
                int v = static_cast<int>(std::max<long long>(0, ms));
                timeout_ms = timeout_ms < 0 ? v : std::min(timeout_ms, v);
            };
            if (kill_deadline_) until(*kill_deadline_);
            if (drain_deadline) until(*drain_deadline);

            int r = poll(fds.data(), fds.size(), timeout_ms);
            if (r < 0 && errno != EINTR) throw IoError(fmt::format("poll: {}", std::strerror(errno)));
            if (r > 0) {
                if (fds[0].revents) {
                    unsigned char sigs[64];
                    ssize_t k;
                    while ((k = read(g_sig_pipe[0], sigs, sizeof sigs)) > 0) {
                        for (ssize_t i = 0; i < k; ++i) {
                            if (sigs[i] == SIGTERM || sigs[i] == SIGINT) on_launcher_signal(sigs[i]);
                        }
                    }
                }
                for (std::size_t i = 1; i < fds.size(); ++i) {
                    if (fds[i].revents) pump(*owners[i - 1].first, fmt::format("[rank {}] ", owners[i - 1].second));
                }
            }
            if (kill_deadline_ && Clock::now() >= *kill_deadline_) {
                if (running_count() > 0) {
                    log_line(fmt::format("{} worker(s) still running {} s after SIGTERM; sending SIGKILL",
                                         running_count(), opt_.kill_grace_s));
                    signal_all(SIGKILL);
                }
                kill_deadline_.reset();
            }
            if (drain_deadline && Clock::now() >= *drain_deadline) {
                // Output held open by a process that is not our descendant any more: give up on it.
                for (auto& w : workers_) {
                    for (Stream* s : {&w.out, &w.err}) {
                        if (s->fd >= 0) {
                            relay(*s, fmt::format("[rank {}] ", w.rank), true);
                            close(s->fd);
                            s->fd = -1;
                        }
                    }
                }
            }
        }
    }

    const LaunchOptions& opt_;
    const WorkerGroupEnv& group_;
    const WorkerLogs& logs_;
    int restart_count_;
    int master_port_;
    std::vector<Worker> workers_;
    Outcome outcome_;
    bool tearing_down_ = false;
    std::optional<Clock::time_point> kill_deadline_;
};

}  // namespace

WorkerGroupEnv worker_group_env(const LaunchOptions& opt) {
    WorkerGroupEnv g;
    g.kind = opt.kind();
    g.max_restarts = opt.max_restarts;
    g.run_id = opt.run_id;
    g.omp_threads = default_omp_threads(g.kind, opt.cpu_count, opt.node.nproc_per_node.value);
    return g;
}

std::vector<std::string> worker_args_for_attempt(const LaunchOptions& opt, int restart_count) {
    std::vector<std::string> args = opt.worker_args;
    if (restart_count == 0 || opt.exec_program || args.empty() || args[0] != "train") return args;
    for (const auto& a : args) {
        if (a == "--resume" || a.rfind("--resume=", 0) == 0) return args;
    }
    args.push_back("--resume");
    args.push_back("auto");
    return args;
}

int pick_free_port(const std::string& addr) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw DistError(fmt::format("socket: {}", std::strerror(errno)));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = 0;
    sa.sin_addr.s_addr = is_loopback(addr) ? htonl(INADDR_LOOPBACK) : htonl(INADDR_ANY);
    socklen_t len = sizeof sa;
    if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
        int e = errno;
        close(fd);
        throw DistError(fmt::format("cannot pick a free port on {}: {}", addr, std::strerror(e)));
    }
    close(fd);
    return ntohs(sa.sin_port);
}

int run_launch(const LaunchOptions& opt) {
    if (opt.worker_args.empty() && !opt.exec_program) {
        throw UsageError(
            "no worker command: give it after `--`, e.g. `llmtrain launch --nproc-per-node 2 -- train --config F`");
    }
    SignalScope signals;
    // Orphaned grandchildren are reparented to us instead of init, so none can escape the cleanup.
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    const WorkerGroupEnv group = worker_group_env(opt);
    const WorkerLogs logs(opt.log_dir, opt.run_id);
    const std::string hostname = this_host().hostname;
    if (!opt.log_dir.empty()) log_line(fmt::format("worker logs and error files under {}", logs.run_dir()));

    for (int restart = 0;; ++restart) {
        int port = opt.node.master_port.value;
        if (port == 0) port = pick_free_port(opt.node.master_addr.value);
        if (restart > 0 || opt.node.master_port.value == 0) {
            log_line(fmt::format("attempt {} of {}: {} worker(s), master {}:{}", restart + 1, opt.max_restarts + 1,
                                 opt.node.nproc_per_node.value, opt.node.master_addr.value, port));
        }
        Attempt attempt(opt, group, logs, restart, port);
        auto r = attempt.run();
        if (r.stop_signal) return r.first_failure_code ? r.first_failure_code : 128 + r.stop_signal;
        if (r.first_failure_rank < 0) {
            logs.remove_if_temporary();
            return 0;
        }
        const WorkerFailure& cause = root_cause(r.failures);
        r.first_failure_rank = cause.rank;
        r.first_failure_code = cause.exit_code;
        log_line(describe_failure(cause, hostname));
        // llmtrain exits 2 for bad input (config, data, a checkpoint that does not fit): the same command
        // would fail the same way, so it is not retried (as the Kubernetes podFailurePolicy we render).
        if (!opt.exec_program && r.first_failure_code == kBadInputExitCode && restart < opt.max_restarts) {
            log_line(fmt::format("worker rank {} failed with exit code {} (bad input: config, arguments, data or "
                                 "checkpoint); not restarting, a restart would fail the same way",
                                 r.first_failure_rank, kBadInputExitCode));
            return r.first_failure_code;
        }
        if (restart >= opt.max_restarts) {
            log_line(fmt::format("worker rank {} failed with {}; {}; logs and error files kept under {}",
                                 r.first_failure_rank, describe_exit_code(r.first_failure_code),
                                 opt.max_restarts
                                     ? fmt::format("no restart left (--max-restarts {})", opt.max_restarts)
                                     : std::string("not restarting (--max-restarts 0)"),
                                 logs.run_dir()));
            return r.first_failure_code;
        }
        const auto next = worker_args_for_attempt(opt, restart + 1);
        std::string cmdline = opt.exec_program ? *opt.exec_program : opt.argv0;
        for (const auto& a : next) cmdline += " " + a;
        log_line(fmt::format("restarting all {} worker(s) (restart {} of {}){}: {}", opt.node.nproc_per_node.value,
                             restart + 1, opt.max_restarts, next != opt.worker_args ? " with --resume auto" : "",
                             cmdline));
    }
}

}  // namespace llmt::launch
