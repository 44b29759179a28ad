// Server wiring: options -> store, tokens, executor, scheduler, router -> our HTTP server (server/http).
#include "server/server.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>

#include <fmt/format.h>

#include "core/error.h"
#include "core/fs.h"
#include "server/http/server.h"
#include "server/scheduler/kubernetes_executor.h"
#include "server/scheduler/local_executor.h"
#include "server/routes/prom.h"
#include "server/routes/router.h"
#include "server/scheduler/scheduler.h"
#include "server/jobs/store.h"
#include "server/routes/web_assets.h"

namespace llmt::server {

namespace fs = std::filesystem;

namespace {

std::unique_ptr<Executor> make_executor(const ServerOptions& o) {
    if (o.executor == "local") {
        std::error_code ec;
        fs::path self = fs::read_symlink("/proc/self/exe", ec);
        if (ec) throw IoError("cannot find this binary via /proc/self/exe: " + ec.message());
        return std::make_unique<LocalExecutor>(self, fs::current_path(), o.job_env);
    }
    if (o.executor.rfind("kubernetes", 0) == 0)
        return std::make_unique<KubernetesExecutor>(parse_kubernetes_options(o.executor));
    throw UsageError("--executor must be local or kubernetes[:KEY=VALUE,...], got '" + o.executor + "'");
}

// The policy's paths as this server sees them (docs/security.md "What a job may touch").
// --allow-endpoint values: http(s) URL prefixes with a host, or s3:// bucket prefixes with a bucket (a
// prefix matches only at a '/' boundary). The S3 store itself is the operator's AWS_ENDPOINT_URL.
std::vector<std::string> allowed_endpoints(const std::vector<std::string>& prefixes) {
    std::vector<std::string> out;
    for (const auto& e : prefixes) {
        const auto scheme_end = e.find("://");
        const std::string scheme = scheme_end == std::string::npos ? "" : e.substr(0, scheme_end);
        if ((scheme != "http" && scheme != "https" && scheme != "s3") || e.size() == scheme_end + 3 ||
            e[scheme_end + 3] == '/')
            throw UsageError(fmt::format("--allow-endpoint {}: expected an http:// or https:// URL with a host, "
                                         "such as https://mlflow.example.com, or an s3:// bucket (prefix), such as "
                                         "s3://team-bucket/runs",
                                         e));
        out.push_back(e);
    }
    return out;
}

JobAccessPolicy make_access_policy(const ServerOptions& o, const Executor& ex) {
    JobAccessPolicy p;
    p.endpoints = allowed_endpoints(o.allow_endpoint);
    p.local = ex.jobs_see_local_files();
    if (!p.local) {
        // Pods: the read-only volumes every job mounts, and the operator's paths inside the image.
        p.read_roots = ex.job_read_mounts();
        for (const auto& r : o.allow_read) {
            if (r.is_relative())
                throw UsageError(
                    fmt::format("--allow-read {}: with the kubernetes executor, give a path "
                                "as the pods see it (absolute)",
                                r.string()));
            p.read_roots.push_back(r.lexically_normal());
        }
        return p;
    }
    p.relative_base = ex.jobs_workdir();
    p.read_roots = preset_read_roots(o.presets_dir, p.relative_base);
    for (const auto& r : o.allow_read) {
        std::error_code ec;
        fs::path root = fs::canonical(r.is_relative() ? p.relative_base / r : r, ec);
        if (ec) throw UsageError(fmt::format("--allow-read {}: {}", r.string(), ec.message()));
        p.read_roots.push_back(root);
    }
    // The server's own files stay unreadable under any root: other jobs' directories, the tokens, the store.
    for (const fs::path& d : {o.data_dir, o.tokens_file, o.db, fs::path(o.db.string() + "-wal"),
                              fs::path(o.db.string() + "-shm"), fs::path(o.db.string() + "-journal"), o.rates_file,
                              o.quotas_file})
        if (!d.empty()) p.denied.push_back(fs::weakly_canonical(fs::absolute(d)));
    return p;
}

void make_private_dir(const fs::path& dir) {
    make_dirs(dir);
    if (::chmod(dir.c_str(), 0700) != 0)
        throw IoError(fmt::format("cannot chmod 0700 {}: {}", dir.string(), std::strerror(errno)));
}

// The dashboard with the token in the fragment (the browser never sends it; web/src/api.js takes it out
// of the address bar), or without one when `token` is empty. A wildcard bind is reached through this
// host's name.
std::string dashboard_link(const std::string& host, int port, const std::string& token) {
    std::string h = host;
    if (h.empty() || h == "0.0.0.0" || h == "::") {
        char name[256] = {};
        h = ::gethostname(name, sizeof name - 1) == 0 && name[0] ? name : "127.0.0.1";
    }
    if (h.find(':') != std::string::npos && h.front() != '[') h = "[" + h + "]";
    if (token.empty()) return fmt::format("http://{}:{}/", h, port);
    return fmt::format("http://{}:{}/#token={}", h, port, token);
}

}  // namespace

struct Server::Impl {
    ServerOptions opts;
    TokenTable tokens;
    bool link_with_token = false;  // the server generated the tokens file: its link carries the admin token
    std::unique_ptr<JobStore> store;
    std::unique_ptr<Executor> executor;
    std::unique_ptr<Scheduler> scheduler;
    ApiMetrics metrics;
    std::unique_ptr<ServerContext> ctx;
    std::unique_ptr<Router> router;
    std::unique_ptr<http::Server> http;  // made by run(); stop() may come before
    std::mutex http_mu;                  // guards `http` and `stopped` between run() and stop()
    bool stopped = false;
    std::optional<fs::path> web_dir;  // the built dashboard, served at /
};

Server::Server(ServerOptions o) : impl_(std::make_unique<Impl>()) {
    Impl& m = *impl_;
    o.data_dir = fs::absolute(o.data_dir);
    make_private_dir(o.data_dir);
    make_private_dir(o.data_dir / "jobs");
    if (o.db.empty()) o.db = o.data_dir / "jobs.sqlite";
    if (o.tokens_file.empty()) {
        bool created = false;
        fs::path p = o.data_dir / "tokens";
        m.tokens = TokenTable::load_or_create(p, &created);
        m.link_with_token = true;
        std::fprintf(stderr, "llmtrain serve: %s admin token in %s (mode 0600); pass --tokens-file to use your own\n",
                     created ? "created an" : "using the", p.c_str());
    } else {
        m.tokens = TokenTable::load(o.tokens_file);
    }
    Rates rates;
    if (!o.rates_file.empty()) rates = load_rates(o.rates_file);
    Quotas quotas;
    if (!o.quotas_file.empty()) quotas = load_quotas(o.quotas_file);
    m.store = std::make_unique<JobStore>(o.db);
    m.executor = make_executor(o);
    JobAccessPolicy access = make_access_policy(o, *m.executor);
    std::vector<std::string> roots;
    for (const auto& r : access.read_roots) roots.push_back(r.string());
    std::fprintf(stderr, "llmtrain serve: jobs may read under: %s (--allow-read)\n",
                 roots.empty() ? "nothing" : fmt::format("{}", fmt::join(roots, ", ")).c_str());
    std::fprintf(stderr, "llmtrain serve: jobs may connect to: %s (--allow-endpoint)\n",
                 access.endpoints.empty() ? "nothing" : fmt::format("{}", fmt::join(access.endpoints, ", ")).c_str());
    m.scheduler = std::make_unique<Scheduler>(
        *m.store, *m.executor, SchedulerOptions{o.data_dir, o.capacity, quotas, o.kill_grace_s, 0.25, access,
                                                  o.max_job_disk_mb, o.disk_check_s});
    m.opts = o;
    m.ctx.reset(
        new ServerContext{o, rates, quotas, *m.store, *m.executor, *m.scheduler, m.metrics, nullptr, {}, access});
    if (auto f = o.throughput_file.empty() ? default_throughput_file() : std::optional<fs::path>(o.throughput_file)) {
        m.ctx->throughput.rows = load_throughput(*f);
        m.ctx->throughput.path = f->string();
    } else {
        std::fprintf(stderr, "llmtrain serve: no throughput table found (configs/throughput.jsonl): estimates will "
                             "say 'unmeasured' and jobs with a budget are refused\n");
    }
    m.ctx->throughput.card = o.estimate_card;
    if (!m.ctx->runs.roots().empty()) {
        std::vector<std::string> runs_roots;
        for (const auto& r : m.ctx->runs.roots()) runs_roots.push_back(r.string());
        std::fprintf(stderr, "llmtrain serve: indexing %zu run(s) read-only under: %s (--runs-dir)\n",
                     m.ctx->runs.list("", 0).total, fmt::format("{}", fmt::join(runs_roots, ", ")).c_str());
    }
    m.router = std::make_unique<Router>(m.tokens, m.metrics);
    m.ctx->router = m.router.get();
    register_system_routes(*m.router, *m.ctx);
    register_job_routes(*m.router, *m.ctx);
    register_job_output_routes(*m.router, *m.ctx);
    register_preset_routes(*m.router, *m.ctx);
    register_mcp_routes(*m.router, *m.ctx);
    register_run_routes(*m.router, *m.ctx);
    m.web_dir = find_web_dir(o.web_dir);
    install_web_assets(*m.router, m.web_dir);
    if (m.web_dir)
        std::fprintf(stderr, "llmtrain serve: dashboard at / from %s\n", m.web_dir->c_str());
    else
        std::fprintf(stderr, "llmtrain serve: the dashboard is not built (web/dist): / answers 503; run "
                             "scripts/setup.sh or pass --web-dir\n");
}

Server::~Server() {
    stop();
}

void Server::run(const std::function<void(int port)>& on_listening) {
    Impl& m = *impl_;
    http::ServerConfig cfg;
    cfg.host = m.opts.host;
    cfg.port = m.opts.port;
    cfg.threads = m.opts.threads;
    cfg.limits.max_body_bytes = m.opts.max_body_bytes;
    cfg.limits.head_timeout_s = m.opts.head_timeout_s;
    cfg.limits.body_timeout_s = m.opts.body_timeout_s;
    cfg.limits.max_connections = m.opts.max_connections;
    cfg.limits.response_timeout_s = m.opts.response_timeout_s;
    cfg.limits.max_connections_per_address = m.opts.max_connections_per_address;
    cfg.limits.max_in_flight_per_address = m.opts.max_in_flight_per_address;
    cfg.limits.max_streams = m.opts.max_streams;
    cfg.limits.max_queued = m.opts.max_queued < 0 ? 2 * static_cast<size_t>(std::max(1, m.opts.threads))
                                                  : static_cast<size_t>(m.opts.max_queued);
    cfg.handler = [&m](http::Request& req, http::Response& res) { m.router->handle(req, res); };
    cfg.render_error = render_http_error;
    {
        std::lock_guard<std::mutex> lk(m.http_mu);
        if (m.stopped) return;
        m.http = std::make_unique<http::Server>(std::move(cfg));
    }
    const int port = m.http->bind();
    m.scheduler->start();
    std::fprintf(stderr,
                 "llmtrain serve: listening on http://%s:%d (executor %s, capacity cpus=%d,gpus=%d, data %s)\n",
                 m.opts.host.c_str(), port, m.executor->name().c_str(), m.opts.capacity.cpus, m.opts.capacity.gpus,
                 m.opts.data_dir.c_str());
    // With --tokens-file the tokens are the operator's: none of them goes to a log.
    if (m.link_with_token)
        std::fprintf(stderr, "llmtrain serve: open %s\n",
                     dashboard_link(m.opts.host, port, m.tokens.link_token()).c_str());
    else
        std::fprintf(stderr, "llmtrain serve: open %s (sign in with a token of --tokens-file)\n",
                     dashboard_link(m.opts.host, port, "").c_str());
    std::fflush(stderr);
    if (!m.opts.port_file.empty()) write_file_atomic(m.opts.port_file, fmt::format("{}:{}\n", m.opts.host, port));
    if (on_listening) on_listening(port);
    m.http->run();
    m.scheduler->stop();
}

void Server::stop() {
    if (!impl_) return;
    std::lock_guard<std::mutex> lk(impl_->http_mu);
    impl_->stopped = true;
    if (impl_->http) impl_->http->stop();
}

}  // namespace llmt::server
