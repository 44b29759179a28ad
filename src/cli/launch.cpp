// `llmtrain launch [flags] -- train --config F ...`: torchrun-compatible local launcher (one per node/pod).
// Resolves the node level (launch/node_env.h) and runs the workers (launch/launcher.h); docs/distributed.md.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <random>

#include "cli/command.h"
#include "core/error.h"
#include "launch/launcher.h"
#include "launch/node_env.h"
#include "launch/worker_logs.h"
#include "core/knobs.h"

namespace llmt::cli {

namespace {

struct LaunchArgs {
    std::string nnodes, node_rank, nproc_per_node, master_addr, master_port, exec, rdzv_endpoint, rdzv_backend,
        rdzv_id, log_dir, redirects, tee;
    CLI::Option *o_nnodes = nullptr, *o_node_rank = nullptr, *o_nproc = nullptr, *o_addr = nullptr,
                *o_port = nullptr, *o_exec = nullptr, *o_endpoint = nullptr, *o_rdzv_id = nullptr;
    bool standalone = false, dry_run = false, no_python = false;
    int max_restarts = 0;
    double kill_grace_s = 30;
    std::vector<std::string> command;
};

std::optional<std::string> given(const CLI::Option* o, const std::string& v) {
    if (o->count() == 0) return std::nullopt;
    return v;
}

// The program a worker runs: --exec, --no-python's first argument, or a first argument that is not a
// subcommand of this binary (`-- python3 train.py`); nullopt = this binary. torchrun's `script.py` form
// runs `python3 -u script.py` (torchrun runs its own interpreter with -u).
void resolve_program(const CLI::App& root, const LaunchArgs& a, launch::LaunchOptions& opt) {
    if (a.o_exec->count()) {
        opt.exec_program = a.exec;
        return;
    }
    if (opt.worker_args.empty()) return;
    const std::string first = opt.worker_args.front();
    const auto subs = root.get_subcommands([&](const CLI::App* s) { return s->check_name(first); });
    if (!a.no_python && !subs.empty()) return;
    opt.worker_args.erase(opt.worker_args.begin());
    if (!a.no_python && first.size() > 3 && first.compare(first.size() - 3, 3, ".py") == 0) {
        opt.exec_program = "python3";
        opt.worker_args.insert(opt.worker_args.begin(), {"-u", first});
        return;
    }
    opt.exec_program = first;
}

// torchrun's --rdzv-backend: static, and c10d read as static (node ranks from the usual sources, no
// elastic membership); docs/distributed.md "torchrun compatibility".
void check_rdzv_backend(const std::string& backend) {
    if (backend.empty() || backend == "static" || backend == "c10d") return;
    throw UsageError(fmt::format("--rdzv-backend '{}': expected static or c10d (etcd rendezvous is not supported)",
                                 backend));
}

// TORCHELASTIC_RUN_ID: --rdzv-id, else a random id under --standalone (as torchrun), else "none".
std::string resolve_run_id(const LaunchArgs& a) {
    if (a.o_rdzv_id->count()) {
        if (a.rdzv_id.empty() || a.rdzv_id.find('/') != std::string::npos) {
            throw UsageError(fmt::format("--rdzv-id '{}': expected a non-empty id without '/'", a.rdzv_id));
        }
        return a.rdzv_id;
    }
    if (!a.standalone) return "none";
    std::random_device rd;
    return fmt::format("{:08x}-{:04x}-{:04x}-{:04x}-{:04x}{:08x}", rd(), rd() & 0xffff, (rd() & 0x0fff) | 0x4000,
                       (rd() & 0x3fff) | 0x8000, rd() & 0xffff, rd());
}

// A command job's LLMTRAIN_OUTPUT_DIR and the directory of its LLMTRAIN_METRICS_FILE (server/jobs/command_job.h),
// created for the program when they are missing, e.g. /out/<job> on a fresh volume of a pod.
void make_command_job_dirs() {
    for (const Location where : {Location::kOutputDir, Location::kMetricsFile}) {
        const std::string v = location_value(where);
        if (v.empty()) continue;
        const std::filesystem::path dir =
            where == Location::kOutputDir ? std::filesystem::path(v) : std::filesystem::path(v).parent_path();
        std::error_code ec;
        if (!dir.empty()) std::filesystem::create_directories(dir, ec);
        if (ec)
            throw IoError(fmt::format("{}={}: cannot create {}: {}", location_name(where), v, dir.string(),
                                      ec.message()));
    }
}

}  // namespace

void register_launch(CLI::App& app, Runtime& rt) {
    auto* cmd = app.add_subcommand(
        "launch",
        "Run worker processes with torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR, ...): "
        "llmtrain launch [flags] -- train --config F");
    auto a = std::make_shared<LaunchArgs>();
    // torchrun spells these with dashes or underscores; both are accepted.
    a->o_nnodes = cmd->add_option("--nnodes", a->nnodes,
                                  "number of nodes, N or N:N (else PET_NNODES, WORLD_SIZE of a PyTorchJob, 1)");
    a->o_node_rank = cmd->add_option("--node-rank,--node_rank", a->node_rank,
                                     "this node's rank (else PET_NODE_RANK, JOB_COMPLETION_INDEX, LLMTRAIN_POD_INDEX, "
                                     "RANK of a PyTorchJob, the hostname's trailing -N, 0)");
    a->o_nproc = cmd->add_option("--nproc-per-node,--nproc_per_node", a->nproc_per_node,
                                 "workers on this node: a number, auto or cpu (else PET_NPROC_PER_NODE, 1)");
    a->o_addr = cmd->add_option("--master-addr,--master_addr", a->master_addr,
                                "host of node 0, where rank 0 serves the store (else PET_MASTER_ADDR, MASTER_ADDR, "
                                "127.0.0.1 on one node)");
    a->o_port = cmd->add_option("--master-port,--master_port", a->master_port,
                                "port of the store; 0 picks a free one (one node only) (else PET_MASTER_PORT, "
                                "MASTER_PORT, 29500)");
    a->o_endpoint =
        cmd->add_option("--rdzv-endpoint,--rdzv_endpoint", a->rdzv_endpoint,
                        "HOST[:PORT] of node 0 (port default 29400), instead of --master-addr/--master-port");
    cmd->add_option("--rdzv-backend,--rdzv_backend", a->rdzv_backend,
                    "static (default) or c10d, read as static: node ranks come from the sources above");
    a->o_rdzv_id = cmd->add_option("--rdzv-id,--rdzv_id,--run-id,--run_id", a->rdzv_id,
                                   "the job's id, TORCHELASTIC_RUN_ID of the workers (default none; random with "
                                   "--standalone)");
    cmd->add_option("--log-dir,--log_dir", a->log_dir,
                    "keep the workers' error files (and with --redirects/--tee their stdout.log, stderr.log) under "
                    "DIR/<run id>_XXXXXX/attempt_<k>/<local rank>/ (default: a temporary directory, removed after a "
                    "success)");
    cmd->add_option("-r,--redirects", a->redirects,
                    "send worker output to the log files instead of the console: 0 none, 1 stdout, 2 stderr, 3 both, "
                    "or per local rank LR:N,LR:N");
    cmd->add_option("-t,--tee", a->tee, "like --redirects, but also to the console (with the rank prefix)");
    cmd->add_flag("--no-python,--no_python", a->no_python,
                  "the first argument after -- is a program to run, even if it is a subcommand name");
    cmd->add_flag("--standalone", a->standalone, "one node on 127.0.0.1 with a free port (several jobs side by side)");
    cmd->add_option(
           "--max-restarts,--max_restarts", a->max_restarts,
           "restart all workers up to this many times when one fails, except for bad input (exit 2); train is "
           "resumed with --resume auto, which needs output.run_id")
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--kill-grace-s", a->kill_grace_s,
                    "seconds between SIGTERM and SIGKILL when stopping workers (default 30)")
        ->check(CLI::NonNegativeNumber);
    a->o_exec = cmd->add_option("--exec", a->exec,
                                "run this program (PATH lookup) with the arguments after -- instead of llmtrain "
                                "(like torchrun's --no-python)");
    cmd->add_flag("--dry-run", a->dry_run,
                  "print the resolved node environment and each worker's command; run nothing");
    cmd->add_option("command", a->command, "the worker's command after --, e.g. -- train --config F");
    cmd->footer(
        "Exit code: 0 when every worker exits 0; else the first failing worker's code (128 + signal number for a\n"
        "signal, 127 when the program cannot be run); 128 + signal when a SIGTERM/SIGINT to the launcher stopped\n"
        "workers that then exited 0. Each output line of worker k is prefixed \"[rank k] \". docs/distributed.md");

    cmd->callback([a, &rt, &app] {
        launch::NodeFlags flags;
        flags.nnodes = given(a->o_nnodes, a->nnodes);
        flags.node_rank = given(a->o_node_rank, a->node_rank);
        flags.nproc_per_node = given(a->o_nproc, a->nproc_per_node);
        flags.master_addr = given(a->o_addr, a->master_addr);
        flags.master_port = given(a->o_port, a->master_port);
        if (a->o_endpoint->count()) flags.rdzv_endpoint = a->rdzv_endpoint;
        flags.standalone = a->standalone;
        check_rdzv_backend(a->rdzv_backend);
        const auto host = launch::this_host();

        launch::LaunchOptions opt;
        opt.node = launch::resolve_node_env(flags, launch::process_env(), host);
        opt.worker_args = a->command;
        resolve_program(app, *a, opt);
        opt.run_id = resolve_run_id(*a);
        opt.log_dir = a->log_dir;
        const int n = opt.node.nproc_per_node.value;
        if (!a->redirects.empty()) opt.redirects = launch::parse_std_spec(a->redirects, n, "--redirects");
        if (!a->tee.empty()) opt.tee = launch::parse_std_spec(a->tee, n, "--tee");
        if (!rt.argv.empty()) opt.argv0 = rt.argv[0];
        opt.max_restarts = a->max_restarts;
        opt.kill_grace_s = a->kill_grace_s;
        opt.cpu_count = host.cpu_count;
        if (opt.worker_args.empty() && !opt.exec_program) {
            throw UsageError(
                "no worker command: give it after `--`, e.g. `llmtrain launch --nproc-per-node 2 -- train --config "
                "F`");
        }

        const auto group = launch::worker_group_env(opt);
        const auto& omp = group.omp_threads;
        const std::string omp_text =
            !omp ? std::string("OMP_NUM_THREADS from the environment")
            : group.kind == launch::WorkerKind::kProgram
                ? fmt::format("OMP_NUM_THREADS={}", *omp)
                : fmt::format("OMP_NUM_THREADS={} ({} CPUs / {} workers)", *omp, host.cpu_count, n);
        fmt::print(stderr, "llmtrain launch: {} {}\n", opt.node.describe(), omp_text);
        if (auto warning = launch::omp_threads_warning(group.kind, omp); !warning.empty()) {
            fmt::print(stderr, "llmtrain launch: {}\n", warning);
        }
        if (a->dry_run) {
            for (int lr = 0; lr < n; ++lr) {
                std::string line;
                launch::WorkerSlot slot{lr, opt.node.master_port.value, 0, ""};
                for (const auto& [k, v] : launch::worker_env(opt.node, group, slot)) {
                    if (!v.empty()) line += k + "=" + v + " ";
                }
                line += opt.exec_program ? *opt.exec_program : opt.argv0;
                for (const auto& w : opt.worker_args) line += " " + w;
                fmt::print("{}\n", line);
            }
            rt.exit_code = 0;
            return;
        }
        make_command_job_dirs();
        rt.exit_code = launch::run_launch(opt);
    });
}

}  // namespace llmt::cli
