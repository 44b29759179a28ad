// What route handlers share: options, the store, the executor, the scheduler and the metrics.
// Route files take a ServerContext& and register their routes on the Router (server/routes/router.h).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "server/scheduler/admission.h"
#include "server/scheduler/disk_usage.h"
#include "server/estimate/estimate.h"
#include "server/jobs/job_access.h"
#include "server/jobs/job_result.h"
#include "server/runs/metrics_index.h"
#include "server/estimate/preset_cache.h"
#include "server/runs/runs_index.h"

namespace llmt::server {

class JobStore;
class Executor;
class Scheduler;
class ApiMetrics;
class Router;

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8080;                        // 0: pick a free port (printed on stderr and to --port-file)
    std::filesystem::path db;               // default <data_dir>/jobs.sqlite
    std::filesystem::path data_dir = "llmtrain-data";
    std::string executor = "local";
    Capacity capacity;
    std::filesystem::path tokens_file;      // default: <data_dir>/tokens, created with one admin token
    std::filesystem::path rates_file, quotas_file;
    std::filesystem::path throughput_file;  // default: default_throughput_file() (server/estimate/throughput.h)
    std::string estimate_card;              // prefer rows of this card ("" = the latest measured)
    std::filesystem::path presets_dir = "configs/presets";
    std::filesystem::path port_file;        // written once listening ("host:port"), for scripts and tests
    std::filesystem::path web_dir;          // --web-dir: the built dashboard (default: see web_assets.h)
    size_t max_body_bytes = 1 << 20;        // after chunked decoding too; Content-Encoding is refused (415)
    double head_timeout_s = 10;             // a whole request head (and an idle keep-alive connection)
    double body_timeout_s = 30;             // a whole request body
    size_t max_connections = 512;           // past it, the oldest connection still sending its head is closed
    double kill_grace_s = 30;
    int64_t max_job_disk_mb = kDefaultMaxJobDiskMb;  // a running job's directory; 0: no per-job limit
    double disk_check_s = 10;                         // how often running jobs' directories are measured
    int threads = 32;
    int max_queued = -1;                    // complete heads waiting for a busy pool, past it 503; -1: 2 x threads
    double response_timeout_s = 30;         // a fixed answer, whole, to a client slow to take it
    size_t max_connections_per_address = 256;  // past it 429 (never /healthz)
    size_t max_in_flight_per_address = 64;     // requests from one address being answered; past it 429
    size_t max_streams = 0;                 // answers streaming at once; 0: 3/4 of the threads
    // The access policy's inputs (server/jobs/job_access.h, docs/security.md): directories jobs may read
    // besides the presets' data directories, and server environment variables jobs also get.
    std::vector<std::filesystem::path> allow_read;
    std::vector<std::string> job_env;
    std::vector<std::string> allow_endpoint;  // --allow-endpoint: URL prefixes jobs may connect to (MLflow servers)
    bool allow_command_jobs = false;  // --allow-command-jobs: runner/admin tokens may submit programs (command_job.h)
    std::vector<std::filesystem::path>
        runs_dirs;                            // --runs-dir: folders of run directories shown read-only (runs_index.h)
    double runs_rescan_s = 10;                // --runs-rescan-s: a listing older than this scans the folders again
};

struct ServerContext {
    ServerOptions opts;
    Rates rates;
    Quotas quotas;
    JobStore& store;
    Executor& executor;
    Scheduler& scheduler;
    ApiMetrics& metrics;
    const Router* router = nullptr;  // for the OpenAPI document
    ThroughputTable throughput;      // measured rows for estimates (loaded at start)
    JobAccessPolicy access;          // what jobs may read and write, checked at submit
    PresetCache presets{opts.presets_dir};  // submissions' presets, parsed once per file version
    JobResultCache results{};        // runs' summary.json as `result`, parsed once per file version
    MetricsIndex metrics_index{};    // runs' metrics.jsonl, indexed by step as they grow
    RunsIndex runs{opts.runs_dirs, std::chrono::milliseconds(static_cast<int64_t>(opts.runs_rescan_s * 1000))};
};

void register_job_routes(Router& router, ServerContext& ctx);     // routes_jobs.cpp
void register_job_output_routes(Router& router, ServerContext& ctx);  // routes_job_output.cpp
void register_system_routes(Router& router, ServerContext& ctx);  // routes_system.cpp
void register_preset_routes(Router& router, ServerContext& ctx);  // routes_presets.cpp
void register_mcp_routes(Router& router, ServerContext& ctx);     // mcp.cpp
void register_run_routes(Router& router, ServerContext& ctx);     // routes_runs.cpp

}  // namespace llmt::server
