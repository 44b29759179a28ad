// `llmtrain k8s render|submit|status|logs|cancel|fetch`: Kubernetes manifests from a config, and the
// job's life cycle through kubectl (docs/kubernetes.md). kubectl's failures keep its exit code.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "cli/command.h"
#include "cli/config_options.h"
#include "config/emit.h"
#include "config/path_values.h"
#include "core/error.h"
#include "core/fs.h"
#include "k8s/job_spec.h"
#include "k8s/kubectl.h"
#include "k8s/ops.h"
#include "k8s/render.h"

namespace llmt::cli {
namespace {

// The job's name, as kubectl takes it (`kubectl logs NAME`) and as `k8s render|submit --name` set it:
// every k8s subcommand accepts both `NAME` and `--name NAME`.
struct JobName {
    std::string positional, option;
};

struct SpecOptions {
    JobName name;
    std::string kind = "indexed-job";
    k8s::JobSpec spec;
    std::vector<std::string> node_selector, env;
    std::vector<std::string> command;  // after --: a command job (k8s::JobSpec::command)
};

std::pair<std::string, std::string> split_kv(const std::string& flag, const std::string& kv) {
    auto eq = kv.find('=');
    if (eq == std::string::npos) throw UsageError(fmt::format("{} {}: expected KEY=VALUE", flag, kv));
    return {kv.substr(0, eq), kv.substr(eq + 1)};
}

void add_job_name(CLI::App* cmd, JobName& n, const std::string& what) {
    cmd->add_option("name", n.positional, what + " (or --name NAME)");
    cmd->add_option("--name", n.option, what + " (or as the first argument)");
}

// The name given either way; "" when neither. Two different names are a usage error.
std::string job_name(const JobName& n, const std::string& command) {
    if (!n.positional.empty() && !n.option.empty() && n.positional != n.option)
        throw UsageError(fmt::format("k8s {}: two job names, '{}' and --name '{}': give one", command, n.positional,
                                     n.option));
    return n.option.empty() ? n.positional : n.option;
}

std::shared_ptr<SpecOptions> add_spec_options(CLI::App* cmd) {
    auto o = std::make_shared<SpecOptions>();
    auto& s = o->spec;
    cmd->add_option("--nodes", s.nodes, "number of nodes (pods); rank 0 hosts the rendezvous")->required();
    cmd->add_option("--nproc-per-node", s.nproc_per_node, "training processes per pod (default: GPUs per node, or 1)");
    cmd->add_option("--gpus-per-node", s.gpus_per_node, "nvidia.com/gpu per pod; needs run.device cuda or auto");
    cmd->add_option("--kind", o->kind, "indexed-job (default) | jobset | trainjob | pytorchjob | statefulset");
    add_job_name(cmd, o->name, "job name, a DNS-1035 label; also output.run_id (default: run.name)");
    cmd->add_option("--namespace,-n", s.namespace_, "namespace of every object (default: kubectl's)");
    cmd->add_option("--image", s.image, "container image with llmtrain as entrypoint")->capture_default_str();
    cmd->add_option("--image-pull-policy", s.image_pull_policy, "IfNotPresent | Always | Never")
        ->check(CLI::IsMember({"IfNotPresent", "Always", "Never"}))
        ->capture_default_str();
    cmd->add_option("--data-pvc", s.data_pvc, "PersistentVolumeClaim mounted read-only at /data");
    cmd->add_option("--output-pvc", s.output_pvc,
                    "PersistentVolumeClaim (ReadWriteMany) at /out: run directory and checkpoints, so restarted pods "
                    "resume and artifacts outlive pods (default: an emptyDir)");
    cmd->add_option("--models-pvc", s.models_pvc,
                    "PersistentVolumeClaim mounted read-only at /models (offline weights)");
    cmd->add_option("--hf-token-secret", s.hf_token_secret,
                    "Secret with a Hugging Face token: NAME or NAME:KEY (key HF_TOKEN)");
    cmd->add_option("--s3-secret", s.s3_secret,
                    "Secret with keys AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (and optionally AWS_SESSION_TOKEN, "
                    "AWS_REGION, AWS_ENDPOINT_URL) for output.sync; the pods read them through env valueFrom");
    cmd->add_option("--cpu", s.cpu, "CPU request per pod (default: processes x run.threads)");
    cmd->add_option("--memory", s.memory, "memory request and limit per pod (default: 4Gi per process)");
    cmd->add_option("--max-restarts", s.max_restarts,
                    "retries: per index (Indexed Job), of the whole set (JobSet), backoffLimit (PyTorchJob)")
        ->capture_default_str();
    cmd->add_option("--grace-period", s.grace_period_s,
                    "seconds between SIGTERM and SIGKILL (the SIGTERM checkpoint must fit)")
        ->capture_default_str();
    cmd->add_option("--master-port", s.master_port, "rendezvous port on rank 0")->capture_default_str();
    cmd->add_option("--launcher", s.launcher,
                    "llmtrain: `llmtrain launch` starts the workers | torchrun: the container command is `torchrun "
                    "... --no-python llmtrain train ...` (pytorchjob, trainjob; the image needs torchrun)")
        ->capture_default_str();
    cmd->add_option("--node-selector", o->node_selector, "KEY=VALUE node label the pods require (repeatable)");
    cmd->add_option("--env", o->env, "KEY=VALUE container env, e.g. NCCL_SOCKET_IFNAME=eth0 (repeatable)");
    cmd->add_option("command", o->command,
                    "a command job: the program and its arguments after --, run by llmtrain launch with torchrun's "
                    "environment instead of train (the image must have llmtrain on its PATH); replaces --config");
    cmd->get_option("--config")->required(false);
    return o;
}

// Everything after `--` is the command job's program. CLI11 fills positionals in order, so when no NAME
// came before `--` the job-name positional took the program's first word: give it back.
void take_command_after_dashdash(SpecOptions& o, const std::vector<std::string>& argv) {
    const auto dd = std::find(argv.begin(), argv.end(), "--");
    if (dd == argv.end()) return;
    std::vector<std::string> after(dd + 1, argv.end());
    if (after.empty()) return;
    if (o.command.size() < after.size() && o.name.positional == after.front()) o.name.positional.clear();
    o.command = std::move(after);
}

k8s::JobSpec build_spec(const SpecOptions& o, const ConfigOptions& copts, const std::string& command) {
    k8s::JobSpec s = o.spec;
    s.name = job_name(o.name, command);
    s.kind = k8s::parse_kind(o.kind);
    for (const auto& kv : o.node_selector) s.node_selector.push_back(split_kv("--node-selector", kv));
    for (const auto& kv : o.env) s.env.push_back(split_kv("--env", kv));
    if (!o.command.empty()) {
        // A command job: the program instead of our trainer, so no config.
        if (!copts.path.empty() || !copts.sets.empty())
            throw UsageError("give either --config (our trainer) or a command after -- (your program), not both");
        s.command = o.command;
        s = k8s::resolve(std::move(s));
        for (const auto& w : k8s::warnings(s)) fmt::print(stderr, "llmtrain: warning: {}\n", w);
        return s;
    }
    if (copts.path.empty())
        throw UsageError("--config is required (or, for a command job, the program after --: -- python3 train.py)");
    auto cfg = load_config(copts);
    s.config_yaml = config::to_yaml_written(cfg);  // written keys only: a model directory fills the rest
    s.config_device = cfg.run.device;
    s.config_run_name = cfg.run.name;
    s.config_threads = cfg.run.threads;
    s.config_sync = cfg.output.sync;
    for (const auto& p : config::path_values(cfg.resolved))
        if (p.access == config::Access::kRead) s.config_data_paths.push_back({p.field, p.value});
    s = k8s::resolve(std::move(s));
    for (const auto& w : k8s::warnings(s)) fmt::print(stderr, "llmtrain: warning: {}\n", w);
    return s;
}

struct TargetOptions {
    JobName given;
    std::string name, kind = "indexed-job", namespace_, context;
};

// Sets t.name from NAME or --name; one of them is required.
void resolve_target(TargetOptions& t, const std::string& command) {
    t.name = job_name(t.given, command);
    if (t.name.empty())
        throw UsageError(fmt::format("k8s {}: which job? give its name: `llmtrain k8s {} NAME` (or --name NAME)",
                                     command, command));
}

std::shared_ptr<TargetOptions> add_target_options(CLI::App* cmd) {
    auto t = std::make_shared<TargetOptions>();
    add_job_name(cmd, t->given, "the job's name (as given to k8s submit)");
    cmd->add_option("--kind", t->kind, "the kind it was submitted as")->capture_default_str();
    cmd->add_option("--namespace,-n", t->namespace_, "namespace (default: kubectl's)");
    cmd->add_option("--context", t->context, "kubeconfig context (default: the current one)");
    return t;
}

// Runs f; a failed kubectl sets the process exit code to kubectl's, with its message on stderr.
template <typename F>
void with_kubectl(Runtime& rt, F&& f) {
    try {
        f();
        rt.exit_code = rt.exit_code ? rt.exit_code : 0;
    } catch (const k8s::KubectlError& e) {
        fmt::print(stderr, "llmtrain: error: {}\n", e.what());
        rt.exit_code = e.exit_code();
    }
}

void print_status(const k8s::JobStatus& st) {
    fmt::print("{} {}: {}\n", st.kind, st.name, st.condition);
    fmt::print("{:<5} {:<40} {:<10} {:>8}  {:<20} {}\n", "RANK", "POD", "PHASE", "RESTARTS", "NODE", "STATE");
    for (const auto& p : st.pods) {
        std::string state = p.reason;
        if (p.exit_code) state += fmt::format(" (exit {})", *p.exit_code);
        fmt::print("{:<5} {:<40} {:<10} {:>8}  {:<20} {}\n", p.rank < 0 ? std::string("?") : std::to_string(p.rank),
                   p.name, p.phase, p.restarts, p.node.empty() ? "-" : p.node, state);
    }
    if (st.pods.empty()) fmt::print("(no pods yet)\n");
    fmt::print("metrics (rank 0): {}\n", st.metrics);
}

}  // namespace

void register_k8s(CLI::App& app, Runtime& rt) {
    auto* k8s_cmd = app.add_subcommand("k8s", "Kubernetes: render manifests, submit, status, logs, cancel, fetch");
    k8s_cmd->require_subcommand(1);

    auto* render = k8s_cmd->add_subcommand("render", "Print the Kubernetes objects for a config as YAML");
    auto r_cfg = add_config_options(render);
    auto r_spec = add_spec_options(render);
    auto r_out = std::make_shared<std::string>();
    render->add_option("--output,-o", *r_out, "write to this file instead of stdout");
    render->callback([r_cfg, r_spec, r_out, &rt] {
        take_command_after_dashdash(*r_spec, rt.argv);
        auto spec = build_spec(*r_spec, *r_cfg, "render");
        std::string yaml = k8s::render(spec);
        if (r_out->empty()) {
            fmt::print("{}", yaml);
        } else {
            write_file_atomic(*r_out, yaml);
            fmt::print(stderr, "wrote {}\n", *r_out);
        }
        rt.exit_code = 0;
    });

    auto* submit = k8s_cmd->add_subcommand("submit", "Render and `kubectl apply` the objects");
    auto s_cfg = add_config_options(submit);
    auto s_spec = add_spec_options(submit);
    auto s_ctx = std::make_shared<std::string>();
    auto s_dry = std::make_shared<bool>(false);
    submit->add_option("--context", *s_ctx, "kubeconfig context (default: the current one)");
    submit->add_flag("--dry-run", *s_dry, "kubectl apply --dry-run=server: the API server checks, nothing is created");
    submit->callback([s_cfg, s_spec, s_ctx, s_dry, &rt] {
        take_command_after_dashdash(*s_spec, rt.argv);
        auto spec = build_spec(*s_spec, *s_cfg, "submit");
        with_kubectl(rt, [&] {
            k8s::Kubectl k(spec.namespace_, *s_ctx);
            fmt::print("{}", k8s::submit(k, spec, *s_dry));
            fmt::print(stderr, "follow with: llmtrain k8s logs {} --kind {} --follow\n", spec.name,
                       k8s::kind_name(spec.kind));
        });
    });

    auto* status = k8s_cmd->add_subcommand(
        "status", "Each rank's pod phase, restarts and node; the job's condition; rank 0's latest metrics");
    auto st_t = add_target_options(status);
    auto st_json = std::make_shared<bool>(false);
    status->add_flag("--json", *st_json, "print one JSON document");
    status->callback([st_t, st_json, &rt] {
        resolve_target(*st_t, "status");
        auto kind = k8s::parse_kind(st_t->kind);
        with_kubectl(rt, [&] {
            k8s::Kubectl k(st_t->namespace_, st_t->context);
            auto st = k8s::status(k, kind, st_t->name);
            if (*st_json) fmt::print("{}\n", st.to_json().dump());
            else print_status(st);
        });
    });

    auto* logs =
        k8s_cmd->add_subcommand("logs", "All ranks' logs with [rank k] prefixes (merged by time, or followed)");
    auto l_t = add_target_options(logs);
    auto l_follow = std::make_shared<bool>(false);
    auto l_rank = std::make_shared<int>(-1);
    logs->add_flag("--follow,-f", *l_follow, "stream until the pods exit");
    logs->add_option("--rank", *l_rank, "only this node rank")->check(CLI::NonNegativeNumber);
    logs->callback([l_t, l_follow, l_rank, &rt] {
        resolve_target(*l_t, "logs");
        auto kind = k8s::parse_kind(l_t->kind);
        with_kubectl(rt, [&] {
            k8s::Kubectl k(l_t->namespace_, l_t->context);
            rt.exit_code = k8s::logs(k, kind, l_t->name, *l_follow, *l_rank, stdout);
        });
    });

    auto* cancel = k8s_cmd->add_subcommand("cancel", "Delete what submit created (workload, Service, ConfigMap)");
    auto c_t = add_target_options(cancel);
    cancel->callback([c_t, &rt] {
        resolve_target(*c_t, "cancel");
        auto kind = k8s::parse_kind(c_t->kind);
        with_kubectl(rt, [&] {
            k8s::Kubectl k(c_t->namespace_, c_t->context);
            fmt::print("{}", k8s::cancel(k, kind, c_t->name));
        });
    });

    auto* fetch =
        k8s_cmd->add_subcommand("fetch", "Copy the run directory (metrics, checkpoints, summary) from /out to here");
    auto f_t = add_target_options(fetch);
    auto f_dest = std::make_shared<std::string>("runs");
    fetch->add_option("--dest", *f_dest, "local directory; the run lands in DEST/<name>")->capture_default_str();
    fetch->callback([f_t, f_dest, &rt] {
        resolve_target(*f_t, "fetch");
        auto kind = k8s::parse_kind(f_t->kind);
        with_kubectl(rt, [&] {
            k8s::Kubectl k(f_t->namespace_, f_t->context);
            std::string local = k8s::fetch(k, kind, f_t->name, *f_dest, stderr);
            fmt::print("{}\n", local);
        });
    });
}

}  // namespace llmt::cli
