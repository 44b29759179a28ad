// `llmtrain launch [flags] -- train --config F ...`: torchrun-compatible local launcher (one per node/pod).
// Resolves the node level (launch/node_env.h) and runs the workers (launch/launcher.h); docs/distributed.md.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/command.h"
#include "core/error.h"
#include "launch/launcher.h"
#include "launch/node_env.h"

namespace llmt::cli {

namespace {

struct LaunchArgs {
    std::string nnodes, node_rank, nproc_per_node, master_addr, master_port, exec;
    CLI::Option *o_nnodes = nullptr, *o_node_rank = nullptr, *o_nproc = nullptr, *o_addr = nullptr,
                *o_port = nullptr, *o_exec = nullptr;
    bool standalone = false, dry_run = false;
    int max_restarts = 0;
    double kill_grace_s = 30;
    std::vector<std::string> command;
};

std::optional<std::string> given(const CLI::Option* o, const std::string& v) {
    if (o->count() == 0) return std::nullopt;
    return v;
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
    cmd->add_flag("--standalone", a->standalone, "one node on 127.0.0.1 with a free port (several jobs side by side)");
    cmd->add_option("--max-restarts,--max_restarts", a->max_restarts,
                    "restart all workers up to this many times when one fails, except for bad input (exit 2); train is "
                    "resumed with --resume auto, which needs output.run_id")
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--kill-grace-s", a->kill_grace_s,
                    "seconds between SIGTERM and SIGKILL when stopping workers (default 30)")
        ->check(CLI::NonNegativeNumber);
    a->o_exec = cmd->add_option("--exec", a->exec,
                                "run this program (PATH lookup) with the arguments after -- instead of llmtrain "
                                "(like torchrun's --no-python)");
    cmd->add_flag("--dry-run", a->dry_run, "print the resolved node environment and each worker's command; run nothing");
    cmd->add_option("command", a->command, "the worker's command after --, e.g. -- train --config F");
    cmd->footer(
        "Exit code: 0 when every worker exits 0; else the first failing worker's code (128 + signal number for a\n"
        "signal, 127 when the program cannot be run); 128 + signal when a SIGTERM/SIGINT to the launcher stopped\n"
        "workers that then exited 0. Each output line of worker k is prefixed \"[rank k] \". docs/distributed.md");

    cmd->callback([a, &rt] {
        launch::NodeFlags flags;
        flags.nnodes = given(a->o_nnodes, a->nnodes);
        flags.node_rank = given(a->o_node_rank, a->node_rank);
        flags.nproc_per_node = given(a->o_nproc, a->nproc_per_node);
        flags.master_addr = given(a->o_addr, a->master_addr);
        flags.master_port = given(a->o_port, a->master_port);
        flags.standalone = a->standalone;
        const auto host = launch::this_host();

        launch::LaunchOptions opt;
        opt.node = launch::resolve_node_env(flags, launch::process_env(), host);
        opt.worker_args = a->command;
        if (a->o_exec->count()) opt.exec_program = a->exec;
        if (!rt.argv.empty()) opt.argv0 = rt.argv[0];
        opt.max_restarts = a->max_restarts;
        opt.kill_grace_s = a->kill_grace_s;
        opt.cpu_count = host.cpu_count;
        if (opt.worker_args.empty() && !opt.exec_program) {
            throw UsageError(
                "no worker command: give it after `--`, e.g. `llmtrain launch --nproc-per-node 2 -- train --config F`");
        }

        const auto omp = launch::default_omp_threads(host.cpu_count, opt.node.nproc_per_node.value);
        const std::string omp_text = omp ? fmt::format("OMP_NUM_THREADS={} ({} CPUs / {} workers)", *omp,
                                                       host.cpu_count, opt.node.nproc_per_node.value)
                                         : std::string("OMP_NUM_THREADS from the environment");
        fmt::print(stderr, "llmtrain launch: {} {}\n", opt.node.describe(), omp_text);
        if (a->dry_run) {
            for (int lr = 0; lr < opt.node.nproc_per_node.value; ++lr) {
                std::string line;
                for (const auto& [k, v] : launch::worker_env(opt.node, lr, opt.node.master_port.value, 0,
                                                             opt.max_restarts, omp)) {
                    if (!v.empty()) line += k + "=" + v + " ";
                }
                line += opt.exec_program ? *opt.exec_program : opt.argv0;
                for (const auto& w : opt.worker_args) line += " " + w;
                fmt::print("{}\n", line);
            }
            rt.exit_code = 0;
            return;
        }
        rt.exit_code = launch::run_launch(opt);
    });
}

}  // namespace llmt::cli
