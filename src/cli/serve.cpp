// `llmtrain serve`: the control plane (src/server, docs/server.md). SIGTERM/SIGINT stop serving; jobs
// keep running in their own process groups and a restarted server re-attaches to them.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <signal.h>

#include <filesystem>
#include <thread>

#include "cli/command.h"
#include "core/error.h"
#include "server/scheduler/admission.h"
#include "server/server.h"

namespace llmt::cli {

namespace {

// --presets-dir's default and where it came from: configs/presets in the working directory (a checkout),
// else the installed <prefix>/share/llmtrain/configs/presets beside <prefix>/bin (make install), else the
// checkout the binary was built in (build/<preset>/llmtrain); empty when none exists.
struct PresetsDir {
    std::string dir, how;
};
PresetsDir default_presets_dir() {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::is_directory("configs/presets", ec)) return {"configs/presets", "the working directory"};
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (ec) return {};
    const fs::path installed = self.parent_path() / "../share/llmtrain/configs/presets";
    if (fs::is_directory(installed, ec))
        return {installed.lexically_normal().string(), "the installed share directory"};
    fs::path up = self.parent_path();
    for (int i = 0; i < 3 && up != up.parent_path(); ++i) {
        up = up.parent_path();
        if (fs::is_directory(up / "configs/presets", ec) && fs::exists(up / "src/cli/serve.cpp", ec))
            return {(up / "configs/presets").string(), "the checkout the binary was built in"};
    }
    return {};
}

// One start-up line: where the presets come from and how many there are, or that there are none.
void say_presets(const std::string& dir, const std::string& how) {
    namespace fs = std::filesystem;
    std::error_code ec;
    std::size_t n = 0;
    if (!dir.empty())
        for (const auto& e : fs::directory_iterator(dir, ec))
            if (e.path().extension() == ".yaml") ++n;
    if (n > 0)
        fmt::print(stderr, "llmtrain serve: {} presets from {} ({})\n", n, dir, how);
    else
        fmt::print(stderr,
                   "llmtrain serve: no presets{}: jobs must send their config (looked in ./configs/presets, "
                   "<prefix>/share/llmtrain/configs/presets and the checkout of the binary; pass --presets-dir)\n",
                   dir.empty() ? "" : " in " + dir);
}

}  // namespace

void register_serve(CLI::App& app, Runtime& rt) {
    auto* cmd =
        app.add_subcommand("serve", "Run the control plane: REST API, job queue and executor (docs/server.md)");
    auto o = std::make_shared<server::ServerOptions>();
    auto listen = std::make_shared<std::string>("127.0.0.1:8080");
    auto capacity = std::make_shared<std::string>("cpus=2,gpus=0");
    auto db = std::make_shared<std::string>();
    auto data_dir = std::make_shared<std::string>("llmtrain-data");
    auto tokens = std::make_shared<std::string>();
    auto rates = std::make_shared<std::string>();
    auto quotas = std::make_shared<std::string>();
    auto throughput = std::make_shared<std::string>();
    const PresetsDir found = default_presets_dir();
    auto presets = std::make_shared<std::string>(found.dir.empty() ? "configs/presets" : found.dir);
    auto port_file = std::make_shared<std::string>();
    auto web_dir = std::make_shared<std::string>();
    cmd->add_option("--listen", *listen,
                    "HOST:PORT to bind (port 0 picks a free one); 127.0.0.1 unless told otherwise");
    cmd->add_option("--db", *db, "SQLite job store (default <data-dir>/jobs.sqlite)");
    cmd->add_option("--data-dir", *data_dir, "jobs' directories, the store and the generated token (created 0700)");
    cmd->add_option("--executor", o->executor,
                    "where jobs run: local | kubernetes[:namespace=NS,image=IMG,output-pvc=C,data-pvc=C,...]");
    cmd->add_option("--capacity", *capacity,
                    "what the queue admits against, e.g. cpus=2,gpus=0 (cpus=0,gpus=0 holds all)");
    cmd->add_option("--tokens-file", *tokens, "bearer tokens, one '<token> <name> <viewer|submitter|admin>' per line");
    cmd->add_option("--rates-file", *rates, "JSON {\"cpu_hour_usd\": x, \"gpu_hour_usd\": y} for cost estimates");
    cmd->add_option("--quotas-file", *quotas,
                    "JSON {\"key=value\": {\"max_running\", \"max_cpus\", \"max_gpus\", \"budget_usd\", "
                    "\"max_disk_mb\"}} per label, {\"submitter:NAME\" or \"submitter:*\": {\"max_queued\", "
                    "\"max_running\", \"max_disk_mb\"}} per submitter");
    cmd->add_option("--throughput-file", *throughput,
                    "measured tokens/s rows for estimates (default: configs/throughput.jsonl beside the binary)");
    cmd->add_option("--estimate-card", o->estimate_card,
                    "estimate from the rows of this card (substring; default: the latest measured)");
    auto o_presets = cmd->add_option("--presets-dir", *presets,
                                     "where preset names in job configs are looked up (default: configs/presets here, "
                                     "else the installed share/llmtrain/configs/presets, else the binary's checkout)");
    cmd->add_option("--max-body-bytes", o->max_body_bytes, "request body size limit (after chunked decoding)")
        ->check(CLI::Range(1024, 64 << 20));
    cmd->add_option("--head-timeout-s", o->head_timeout_s,
                    "deadline for a whole request head, and for an idle keep-alive connection (408 / close)")
        ->check(CLI::Range(0.1, 600.0));
    cmd->add_option("--body-timeout-s", o->body_timeout_s, "deadline for a whole request body (408)")
        ->check(CLI::Range(0.1, 3600.0));
    cmd->add_option("--max-connections", o->max_connections,
                    "open connections; past it the oldest one still sending its head is closed")
        ->check(CLI::Range(8, 1 << 20));
    cmd->add_option("--threads", o->threads,
                    "request workers (each runs one request's handler; heads and idle connections need none)")
        ->check(CLI::Range(1, 1024));
    cmd->add_option("--max-queued", o->max_queued,
                    "complete requests waiting while every worker is busy; past it they get 503 with Retry-After "
                    "(default 2 x --threads)")
        ->check(CLI::Range(0, 1 << 20));
    cmd->add_option("--response-timeout-s", o->response_timeout_s,
                    "deadline for a client to take a whole (non-streamed) answer; past it the connection closes")
        ->check(CLI::Range(0.1, 3600.0));
    cmd->add_option("--max-connections-per-address", o->max_connections_per_address,
                    "open connections from one client address; past it requests get 429 (never /healthz)")
        ->check(CLI::Range(1, 1 << 20));
    cmd->add_option("--max-in-flight-per-address", o->max_in_flight_per_address,
                    "requests from one client address being handled or answered at once; past it 429 (never /healthz)")
        ->check(CLI::Range(1, 1 << 20));
    cmd->add_option("--max-streams", o->max_streams,
                    "answers streamed at once (downloads, followed logs; each holds a worker); past it 503 "
                    "(default 3/4 of --threads)")
        ->check(CLI::Range(0, 1 << 20));
    cmd->add_option("--max-job-disk-mb", o->max_job_disk_mb,
                    "disk one running job's directory may use (MB); past it the job is stopped like a cancel, its "
                    "checkpoints kept (0: no per-job limit; per-submitter and per-label limits: --quotas-file)")
        ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
    cmd->add_option("--disk-check-s", o->disk_check_s, "how often running jobs' directories are measured (seconds)")
        ->check(CLI::Range(0.1, 3600.0));
    cmd->add_option("--kill-grace-s", o->kill_grace_s, "SIGTERM to SIGKILL grace when cancelling or timing out")
        ->check(CLI::Range(0.0, 3600.0));
    auto allow_read = std::make_shared<std::vector<std::string>>();
    cmd->add_option("--allow-read", *allow_read,
                    "a directory (or file) jobs may read data, tokenizers and models from, besides the presets' data "
                    "directories (repeatable); the server's own files stay unreadable (docs/security.md)");
    cmd->add_option("--allow-endpoint", o->allow_endpoint,
                    "an http(s):// URL prefix jobs may connect to, such as an MLflow tracking server for "
                    "tracking.mlflow.uri (repeatable); by default jobs may connect to none (docs/security.md)");
    cmd->add_flag("--allow-command-jobs", o->allow_command_jobs,
                  "accept command jobs ({\"command\": [\"python3\", \"train.py\"]}) from tokens with role runner or "
                  "admin: they run any program as this server's user (local executor) or in their own pod "
                  "(docs/security.md \"Command jobs\")");
    cmd->add_option("--job-env", o->job_env,
                    "NAME of an environment variable of this server that jobs also get (repeatable); by default jobs "
                    "get only non-secret ones (PATH, locale, threads, CUDA/NCCL, LLMTRAIN_*)");
    auto runs_dirs = std::make_shared<std::vector<std::string>>();
    cmd->add_option("--runs-dir", *runs_dirs,
                    "a folder of run directories (as `llmtrain train` writes under output.root_dir) to show "
                    "read-only beside the jobs: list, metrics, logs (repeatable; docs/server.md \"Indexed runs\")");
    cmd->add_option("--runs-rescan-s", o->runs_rescan_s,
                    "look for new run directories under --runs-dir when the last look is older than this")
        ->check(CLI::Range(0.0, 86400.0));
    cmd->add_option("--port-file", *port_file, "write HOST:PORT here once listening");
    cmd->add_option("--web-dir", *web_dir, "the built dashboard served at / (default: share/llmtrain/web beside the "
                                           "binary, else the checkout's web/dist)");
    cmd->callback([=, &rt] {
        auto colon = listen->rfind(':');
        if (colon == std::string::npos) throw UsageError("--listen must be HOST:PORT, got '" + *listen + "'");
        o->host = listen->substr(0, colon);
        try {
            o->port = std::stoi(listen->substr(colon + 1));
        } catch (const std::exception&) {
            o->port = -1;
        }
        if (o->port < 0 || o->port > 65535) throw UsageError("--listen: bad port in '" + *listen + "'");
        o->capacity = server::parse_capacity(*capacity);
        o->db = *db;
        o->data_dir = *data_dir;
        o->tokens_file = *tokens;
        o->rates_file = *rates;
        o->quotas_file = *quotas;
        o->throughput_file = *throughput;
        o->presets_dir = *presets;
        say_presets(*presets, o_presets->count() > 0 ? std::string("--presets-dir") : found.how);
        o->port_file = *port_file;
        o->web_dir = *web_dir;
        o->allow_read.assign(allow_read->begin(), allow_read->end());
        o->runs_dirs.assign(runs_dirs->begin(), runs_dirs->end());

        // Signals go to one watcher thread (blocked everywhere else, inherited by every thread).
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        pthread_sigmask(SIG_BLOCK, &set, nullptr);
        signal(SIGPIPE, SIG_IGN);
        server::Server srv(*o);
        std::thread watcher([&srv, set] {
            int sig = 0;
            sigwait(&set, &sig);
            if (sig != 0) {
                std::fprintf(stderr, "llmtrain serve: signal %d: stopping (jobs keep running)\n", sig);
                srv.stop();
            }
        });
        watcher.detach();
        srv.run();
        rt.exit_code = 0;
    });
}

}  // namespace llmt::cli
