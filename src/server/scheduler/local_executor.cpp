// LocalExecutor: supervisor process per attempt (see local_executor.h). Between fork and exec only
// async-signal-safe calls are made (the server is multi-threaded): every string is built before fork.
#include "server/scheduler/local_executor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"
#include "core/fs.h"
#include "core/time.h"
#include "server/api_error.h"
#include "server/jobs/command_job.h"
#include "server/jobs/job_env.h"
#include "core/knobs.h"

extern char** environ;

namespace llmt::server {

namespace fs = std::filesystem;

namespace {

// Field 22 of /proc/<pid>/stat (start time in clock ticks since boot) and field 3 (state letter).
// Together with the pid they name one process for its lifetime: a reused pid has another start time.
bool proc_stat(int pid, std::string* start, char* state) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    auto rp = s.rfind(')');  // the command name may contain spaces and parentheses
    if (s.empty() || rp == std::string::npos) return false;
    std::istringstream in(s.substr(rp + 2));
    std::string field;
    std::vector<std::string> fields;
    while (in >> field) fields.push_back(field);
    if (fields.size() < 20) return false;
    *state = fields[0][0];  // field 3
    *start = fields[19];    // field 22
    return true;
}

// Async-signal-safe decimal formatting for the supervisor.
size_t format_int(char* buf, int v) {
    char tmp[16];
    size_t n = 0;
    bool neg = v < 0;
    unsigned u = neg ? 0u - static_cast<unsigned>(v) : static_cast<unsigned>(v);
    do {
        tmp[n++] = static_cast<char>('0' + u % 10);
        u /= 10;
    } while (u);
    size_t k = 0;
    if (neg) buf[k++] = '-';
    while (n) buf[k++] = tmp[--n];
    buf[k++] = '\n';
    return k;
}

bool run_help(const fs::path& bin, const std::string& sub, std::string* out) {
    std::string cmd = "'" + bin.string() + "' " + sub + " --help 2>/dev/null";
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return false;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, n);
    return ::pclose(p) == 0;
}

}  // namespace

LocalExecutor::LocalExecutor(fs::path llmtrain_bin, fs::path workdir, std::vector<std::string> job_env)
    : bin_(std::move(llmtrain_bin)), workdir_(std::move(workdir)), job_env_(std::move(job_env)) {
    for (const auto& n : job_env_) check_env_name(n);
    std::string help;
    has_launch_ = run_help(bin_, "launch", &help);
}

void LocalExecutor::validate(const JobSpec& spec) const {
    if (spec.nodes != 1)
        throw ApiError(400, "invalid_field", "the local executor runs single-node jobs (nodes must be 1)", "nodes");
    if (spec.is_command() && !spec.image.empty())
        throw ApiError(400, "invalid_field",
                       "image: the local executor runs command jobs on this machine, not in a container; drop "
                       "\"image\" (it is for serve --executor kubernetes)",
                       "image");
    if ((spec.nproc_per_node > 1 || spec.is_command()) && !has_launch_)
        throw ApiError(400, "invalid_field",
                       "nproc_per_node > 1 needs `llmtrain launch`, which this binary does not have yet",
                       "nproc_per_node");
}

std::vector<RankLog> LocalExecutor::rank_logs(const fs::path& job_dir, const JobSpec& spec) const {
    // One stream per job: the trainer's own output, or the launcher's relay where each rank's lines
    // start with "[rank k] " (src/launch/launcher.h).
    const fs::path f = job_dir / "logs" / "job.log";
    if (spec.cpus() == 1) return {{f, ""}};
    std::vector<RankLog> out;
    for (int r = 0; r < spec.cpus(); ++r) out.push_back({f, fmt::format("[rank {}] ", r)});
    return out;
}

std::string LocalExecutor::start(const AttemptRequest& req, const std::function<void(const std::string&)>& record) {
    const fs::path attempt_dir = req.job_dir / "attempts" / std::to_string(req.attempt);
    make_dirs(attempt_dir);
    make_dirs(req.job_dir / "logs");
    std::vector<std::string> args = {bin_.string()};
    std::string cwd = workdir_.string();
    std::vector<std::string> command_env;
    if (req.spec.is_command()) {
        // Through the launcher even for one process: the program gets torchrun's environment. It runs in
        // the job's directory (docs/security.md "Command jobs").
        auto a = command_job_launch_args(req.spec);
        args.insert(args.end(), a.begin(), a.end());
        cwd = req.job_dir.string();
        command_env = command_job_env(req.run_dir);
    } else if (req.spec.nproc_per_node > 1) {
        // --standalone: one node on 127.0.0.1 with a rendezvous port the launcher picks free per job.
        // Restarts are the server's (attempts), not the launcher's.
        for (const char* a : {"launch", "--standalone", "--max-restarts", "0", "--nproc-per-node"}) args.push_back(a);
        args.push_back(std::to_string(req.spec.nproc_per_node));
        args.push_back("--");
    }
    if (!req.spec.is_command()) {
        for (const char* a : {"train", "--config"}) args.push_back(a);
        args.push_back(req.config_path.string());
        args.push_back("--resume");
        args.push_back("auto");
    }

    // Everything the children touch, built before fork.
    const std::string log_path = (req.job_dir / "logs" / "job.log").string();
    const std::string exit_path = (attempt_dir / "exit_code").string();
    const std::string exit_tmp = exit_path + ".tmp";
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env = job_environment(environ, job_env_);
    // A command job's two variables are ours, whatever the server's environment has under those names.
    std::erase_if(env, [](const std::string& e) {
        return e.rfind(std::string(location_name(Location::kMetricsFile)) + "=", 0) == 0 ||
               e.rfind(std::string(location_name(Location::kOutputDir)) + "=", 0) == 0;
    });
    env.insert(env.end(), command_env.begin(), command_env.end());
    // Each rank runs the one thread admission counted for it (--capacity cpus: a CPU per rank), so jobs side by
    // side never oversubscribe the cores; the launcher and the trainer (run.threads 0) take it from here.
    std::erase_if(env, [](const std::string& e) { return e.rfind("OMP_NUM_THREADS=", 0) == 0; });
    env.push_back("OMP_NUM_THREADS=1");
    if (std::find(job_env_.begin(), job_env_.end(), "HOME") == job_env_.end())
        env.push_back("HOME=" + req.job_dir.string());
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    const std::string header =
        fmt::format("=== llmtrain serve: job {} attempt {} at {}: {} ===\n", req.job_id, req.attempt,
                    utc_iso8601_now(), fmt::join(args, " "));

    int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (log_fd < 0) throw IoError("cannot open " + log_path + ": " + std::strerror(errno));
    (void)!::write(log_fd, header.data(), header.size());
    int go[2];
    if (::pipe2(go, O_CLOEXEC) != 0) {
        ::close(log_fd);
        throw IoError(std::string("pipe: ") + std::strerror(errno));
    }
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);

    pid_t pid = ::fork();
    if (pid < 0) {
        ::close(log_fd);
        ::close(go[0]);
        ::close(go[1]);
        throw IoError(std::string("fork: ") + std::strerror(errno));
    }
    if (pid == 0) {
        // Supervisor. Signals stay blocked here (SIGTERM to the group is for the trainer; the
        // supervisor must live to record the exit status); SIGKILL still ends it.
        ::setpgid(0, 0);
        ::sigprocmask(SIG_SETMASK, &all, nullptr);
        int null_fd = ::open("/dev/null", O_RDONLY);
        ::dup2(null_fd, 0);
        ::dup2(log_fd, 1);
        ::dup2(log_fd, 2);
        ::dup2(go[0], 3);
        // Drop every other descriptor the server holds (listening socket, database), so a supervisor
        // never keeps the server's port or files open after the server is gone.
        ::syscall(SYS_close_range, 4u, ~0u, 0u);
        char c;
        ssize_t n;
        do n = ::read(3, &c, 1);
        while (n < 0 && errno == EINTR);
        ::close(3);
        if (n != 1) _exit(0);  // the server died before recording us: never start the trainer
        pid_t child = ::fork();
        if (child == 0) {
            ::sigprocmask(SIG_SETMASK, &none, nullptr);
            if (::chdir(cwd.c_str()) != 0) _exit(127);
            ::execve(argv[0], argv.data(), envp.data());
            static const char msg[] = "llmtrain serve: exec of the trainer failed\n";
            (void)!::write(2, msg, sizeof msg - 1);
            _exit(127);
        }
        int status = 0, code = 127;
        if (child > 0) {
            while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
            }
            code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
        char buf[24];
        size_t len = format_int(buf, code);
        int fd = ::open(exit_tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            (void)!::write(fd, buf, len);
            ::fsync(fd);
            ::close(fd);
            ::rename(exit_tmp.c_str(), exit_path.c_str());
        }
        _exit(0);
    }
    ::close(log_fd);
    ::close(go[0]);
    ::setpgid(pid, pid);  // also done by the child; whichever runs first wins, both are harmless
    std::string start_ticks;
    char state = '?';
    proc_stat(pid, &start_ticks, &state);
    nlohmann::json h = {{"pid", pid}, {"start", start_ticks}, {"dir", attempt_dir.string()}};
    std::string handle = h.dump();
    try {
        record(handle);
    } catch (...) {
        ::close(go[1]);  // the supervisor reads EOF and exits without starting anything
        ::waitpid(pid, nullptr, 0);
        throw;
    }
    (void)!::write(go[1], "g", 1);
    ::close(go[1]);
    return handle;
}

AttemptStatus LocalExecutor::poll(const std::string& handle) {
    AttemptStatus st;
    if (handle.empty()) {
        st.detail = "no process was recorded for this attempt";
        return st;
    }
    auto h = nlohmann::json::parse(handle);
    int pid = h.at("pid");
    // Reap it if it is our child (a supervisor started by this server process); harmless otherwise.
    ::waitpid(pid, nullptr, WNOHANG);
    std::string start;
    char state = '?';
    if (proc_stat(pid, &start, &state) && start == h.at("start").get<std::string>() && state != 'Z' && state != 'X') {
        st.kind = AttemptStatus::kRunning;
        return st;
    }
    fs::path exit_file = fs::path(h.at("dir").get<std::string>()) / "exit_code";
    std::error_code ec;
    if (fs::exists(exit_file, ec)) {
        st.kind = AttemptStatus::kExited;
        st.exit_code = std::stoi(read_file(exit_file, 64));
        return st;
    }
    st.detail = fmt::format("supervisor pid {} is gone without recording an exit status (killed)", pid);
    return st;
}

void LocalExecutor::stop(const std::string& handle, bool kill) {
    if (handle.empty()) return;
    auto h = nlohmann::json::parse(handle);
    int pid = h.at("pid");
    std::string start;
    char state = '?';
    // Only signal the group if its leader is still the process we started (pids get reused).
    if (!proc_stat(pid, &start, &state) || start != h.at("start").get<std::string>()) return;
    ::kill(-pid, kill ? SIGKILL : SIGTERM);
}

}  // namespace llmt::server
