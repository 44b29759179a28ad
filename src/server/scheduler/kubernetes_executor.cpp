// Kubernetes executor (kubernetes_executor.h): render with src/k8s, `kubectl apply`, read the Job's
// conditions and its pods' exit codes, delete to stop, `kubectl logs` per rank.
#include "server/scheduler/kubernetes_executor.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "config/emit.h"
#include "config/loader.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/json_parse.h"
#include "k8s/kubectl.h"
#include "k8s/ops.h"
#include "k8s/render.h"
#include "server/api_error.h"

namespace llmt::server {

namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

struct Handle {
    std::string name, ns, kind;
};

Handle parse_handle(const std::string& h) {
    try {
        auto j = Json::parse(h);
        return {j.at("name").get<std::string>(), j.value("namespace", ""), j.at("kind").get<std::string>()};
    } catch (const Json::exception& e) {
        throw FormatError(fmt::format("kubernetes executor: bad attempt handle '{}': {}", h, e.what()));
    }
}

// kubectl's output: bounded like any input that is not ours (see k8s/ops.cpp).
Json parse_json(const std::string& s, const std::string& what) {
    try {
        return llmt::parse_json(s, "output", {std::size_t{256} << 20, 128, true});
    } catch (const JsonParseError& e) {
        throw FormatError(fmt::format("kubectl {}: output is not JSON: {}", what, e.what()));
    }
}

}  // namespace

KubernetesOptions parse_kubernetes_options(const std::string& executor) {
    KubernetesOptions o;
    const std::string prefix = "kubernetes";
    if (executor.rfind(prefix, 0) != 0 || (executor.size() > prefix.size() && executor[prefix.size()] != ':'))
        throw UsageError(fmt::format("--executor: expected kubernetes[:KEY=VALUE,...], got '{}'", executor));
    std::string rest = executor.size() > prefix.size() ? executor.substr(prefix.size() + 1) : "";
    std::size_t pos = 0;
    while (pos < rest.size()) {
        std::size_t end = rest.find(',', pos);
        if (end == std::string::npos) end = rest.size();
        const std::string kv = rest.substr(pos, end - pos);
        pos = end + 1;
        const auto eq = kv.find('=');
        if (eq == std::string::npos || eq == 0)
            throw UsageError(fmt::format("--executor kubernetes: expected KEY=VALUE, got '{}'", kv));
        const std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
        if (k == "namespace") o.namespace_ = v;
        else if (k == "context") o.context = v;
        else if (k == "kind") o.kind = v;
        else if (k == "image") o.image = v;
        else if (k == "data-pvc") o.data_pvc = v;
        else if (k == "output-pvc") o.output_pvc = v;
        else if (k == "models-pvc") o.models_pvc = v;
        else if (k == "hf-token-secret") o.hf_token_secret = v;
        else if (k == "s3-secret") o.s3_secret = v;
        else
            throw UsageError(fmt::format("--executor kubernetes: unknown key '{}' (namespace, context, kind, image, "
                                         "data-pvc, output-pvc, models-pvc, hf-token-secret, s3-secret)", k));
    }
    k8s::parse_kind(o.kind);  // refuses a bad kind now, not at the first job
    return o;
}

KubernetesExecutor::KubernetesExecutor(KubernetesOptions o) : o_(std::move(o)), kind_(k8s::parse_kind(o_.kind)) {}

std::string KubernetesExecutor::object_name(const std::string& job_name, int64_t job_id, int nodes) {
    // Budget: the longest pod host name any kind makes is "<name>-node-0-<nodes-1>" (JobSet/TrainJob),
    // and a StatefulSet name is at most 52: keep the name to 52 - len("-node-0-<n>") characters.
    const std::string suffix = "-" + std::to_string(job_id);
    const std::size_t budget = 52 - std::string("-node-0-" + std::to_string(std::max(0, nodes - 1))).size();
    std::string base = job_name;
    if (base.empty() || !(base[0] >= 'a' && base[0] <= 'z')) base = "j" + base;  // DNS-1035: starts with a letter
    if (base.size() + suffix.size() > budget) base.resize(budget - suffix.size());
    while (!base.empty() && base.back() == '-') base.pop_back();
    return base + suffix;
}

void KubernetesExecutor::validate(const JobSpec& spec) const {
    if (spec.gpus_per_node > 0 && spec.nproc_per_node != spec.gpus_per_node)
        throw ApiError(
            400, "invalid_field",
            fmt::format("nproc_per_node ({}) must equal gpus_per_node ({}) on Kubernetes: one process per GPU",
                        spec.nproc_per_node, spec.gpus_per_node),
            "nproc_per_node");
}

std::vector<fs::path> KubernetesExecutor::job_read_mounts() const {
    std::vector<fs::path> m;
    if (!o_.data_pvc.empty()) m.push_back(k8s::kDataDir);
    if (!o_.models_pvc.empty()) m.push_back(k8s::kModelsDir);
    return m;
}

fs::path KubernetesExecutor::job_write_root(const AttemptRequest& req) const {
    return fs::path(k8s::kOutDir) / object_name(req.spec.name, req.job_id, req.spec.nodes);
}

std::string KubernetesExecutor::start(const AttemptRequest& req,
                                      const std::function<void(const std::string&)>& record) {
    k8s::JobSpec s;
    s.kind = kind_;
    s.name = object_name(req.spec.name, req.job_id, req.spec.nodes);
    s.namespace_ = o_.namespace_;
    s.image = req.spec.image.empty() ? o_.image : req.spec.image;
    s.nodes = req.spec.nodes;
    s.nproc_per_node = req.spec.nproc_per_node;
    s.gpus_per_node = req.spec.gpus_per_node;
    s.data_pvc = o_.data_pvc;
    s.output_pvc = o_.output_pvc;
    s.models_pvc = o_.models_pvc;
    s.hf_token_secret = o_.hf_token_secret;
    s.s3_secret = o_.s3_secret;  // output.sync: AWS_* from the operator's Secret (docs/object_storage.md)
    // Retries are the server's (attempts, visible in the API): the workload fails on the first pod failure
    // and the next attempt re-applies it under the same name, so it resumes from /out/<name>.
    s.max_restarts = 0;
    if (req.spec.is_command()) {
        // A program in its own pod, with only the job's volumes (docs/security.md "Command jobs").
        s.command = req.spec.command;
    } else {
        const auto cfg = config::load_config_file(req.config_path);
        s.config_yaml = config::to_yaml_written(cfg);  // written keys only: a model directory fills the rest
        s.config_device = cfg.run.device;
        s.config_run_name = cfg.run.name;
        s.config_threads = cfg.run.threads;
    }
    try {
        s = k8s::resolve(std::move(s));
    } catch (const Error& e) {
        throw IoError(fmt::format("kubernetes executor: job {} cannot be rendered: {}", req.job_id, e.what()));
    }
    k8s::Kubectl k(o_.namespace_, o_.context);
    if (req.attempt > 1) {
        // The previous attempt's failed workload: gone (with its pods) before the same name is applied again.
        k.check({"delete", "--ignore-not-found", "--cascade=foreground", "--wait=true",
                 k8s::workload_resource(kind_) + "/" + s.name});
    }
    k8s::submit(k, s, false);
    // Recorded once the objects exist: a server crash before this line leaves an attempt the next server
    // re-applies under the same name (apply is idempotent), never a second copy.
    const std::string handle = Json{{"name", s.name}, {"namespace", o_.namespace_}, {"kind", o_.kind}}.dump();
    record(handle);
    return handle;
}

AttemptStatus KubernetesExecutor::poll(const std::string& handle) {
    const Handle h = parse_handle(handle);
    const k8s::Kind kind = k8s::parse_kind(h.kind);
    k8s::Kubectl k(h.ns, o_.context);
    const auto r = k.run({"get", k8s::workload_resource(kind), h.name, "-o", "json"});
    if (r.exit_code != 0) {
        if (r.err.find("NotFound") != std::string::npos)
            return {AttemptStatus::kLost, 0,
                    fmt::format("{} {} is gone (deleted)", k8s::workload_resource(kind), h.name)};
        // The API server unreachable is not the job's end: report it and ask again next tick.
        return {AttemptStatus::kRunning, 0, "kubectl: " + r.err};
    }
    const Json w = parse_json(r.out, "get " + h.name);
    std::string done, reason;
    for (const auto& c : w.value(Json::json_pointer("/status/conditions"), Json::array())) {
        if (c.value("status", "") != "True") continue;
        const std::string t = c.value("type", "");
        if (t == "Complete" || t == "Completed" || t == "Succeeded") done = "ok";
        if (t == "Failed") done = "failed", reason = c.value("reason", "") + ": " + c.value("message", "");
    }
    if (done.empty()) return {AttemptStatus::kRunning, 0, ""};
    if (done == "ok") return {AttemptStatus::kExited, 0, "workload complete"};
    // Failed: the exit code of the newest failed container says why (2 = bad input, 143 = SIGTERM, ...).
    const k8s::Names n = k8s::names_for(kind, h.name);
    int code = 1;
    const auto pr = k.run({"get", "pods", "-l", n.pod_selector, "-o", "json"});
    if (pr.exit_code == 0) {
        std::vector<k8s::PodStatus> pods;
        for (const auto& item : parse_json(pr.out, "get pods").value("items", Json::array()))
            pods.push_back(k8s::pod_status(kind, item));
        std::sort(pods.begin(), pods.end(), [](const auto& a, const auto& b) { return a.created < b.created; });
        for (const auto& p : pods)
            if (p.exit_code && *p.exit_code != 0) code = *p.exit_code;
    }
    return {AttemptStatus::kExited, code, "workload failed (" + reason + ")"};
}

void KubernetesExecutor::stop(const std::string& handle, bool kill) {
    const Handle h = parse_handle(handle);
    const k8s::Kind kind = k8s::parse_kind(h.kind);
    k8s::Kubectl k(h.ns, o_.context);
    if (kill) {
        // Past the grace period: no more waiting for the kubelet's SIGTERM -> SIGKILL.
        k.run({"delete", "pods", "-l", k8s::names_for(kind, h.name).pod_selector, "--grace-period=0", "--force",
               "--wait=false"});
    }
    // Deleting the workload deletes its pods; the kubelet sends SIGTERM and waits the pods'
    // terminationGracePeriodSeconds, in which train writes its checkpoint.
    k8s::cancel(k, kind, h.name);
}

std::vector<RankLog> KubernetesExecutor::rank_logs(const fs::path& job_dir, const JobSpec& spec) const {
    int64_t id = 0;
    try {
        id = std::stoll(job_dir.filename().string());
    } catch (const std::exception&) {
        throw InputError(
            fmt::format("kubernetes executor: job directory '{}' does not end in a job id", job_dir.string()));
    }
    const std::string name = object_name(spec.name, id, spec.nodes);
    k8s::Kubectl k(o_.namespace_, o_.context);
    std::vector<RankLog> out;
    const fs::path dir = job_dir / "logs";
    fs::create_directories(dir);
    std::vector<k8s::PodStatus> pods;
    const auto pr = k.run({"get", "pods", "-l", k8s::names_for(kind_, name).pod_selector, "-o", "json"});
    if (pr.exit_code == 0)
        for (const auto& item : parse_json(pr.out, "get pods").value("items", Json::array()))
            pods.push_back(k8s::pod_status(kind_, item));
    for (const auto& p : k8s::latest_per_rank(pods)) {
        if (p.rank < 0) continue;
        // --timestamps, as `llmtrain k8s logs` asks; the leading RFC 3339 stamp is dropped here.
        const auto r = k.run({"logs", "--timestamps", p.name});
        if (r.exit_code != 0) continue;  // not started yet: keep the last copy
        std::string text;
        std::size_t pos = 0;
        while (pos < r.out.size()) {
            std::size_t end = r.out.find('\n', pos);
            if (end == std::string::npos) end = r.out.size();
            const std::string line = r.out.substr(pos, end - pos);
            const auto sp = line.find(' ');
            text += (sp == std::string::npos ? std::string() : line.substr(sp + 1)) + "\n";
            pos = end + 1;
        }
        const fs::path f = dir / fmt::format("rank{}.log", p.rank);
        write_file_atomic(f, text);
        out.push_back({f, ""});
    }
    return out;
}

}  // namespace llmt::server
