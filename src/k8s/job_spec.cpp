// See job_spec.h. Name limits: a pod's host name is its name up to 63 characters (RFC 1123 label), and
// a StatefulSet's controller-revision-hash label value is `<name>-<10 chars>`, so its name is <= 52.
#include "k8s/job_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <regex>

#include "core/error.h"

namespace llmt::k8s {

Kind parse_kind(const std::string& s) {
    if (s == "indexed-job") return Kind::IndexedJob;
    if (s == "jobset") return Kind::JobSet;
    if (s == "trainjob") return Kind::TrainJob;
    if (s == "pytorchjob") return Kind::PyTorchJob;
    if (s == "statefulset") return Kind::StatefulSet;
    throw UsageError(
        fmt::format("--kind {}: expected one of indexed-job, jobset, trainjob, pytorchjob, statefulset", s));
}

const char* kind_name(Kind k) {
    switch (k) {
        case Kind::IndexedJob: return "indexed-job";
        case Kind::JobSet: return "jobset";
        case Kind::TrainJob: return "trainjob";
        case Kind::PyTorchJob: return "pytorchjob";
        case Kind::StatefulSet: return "statefulset";
    }
    return "?";
}

bool is_dns1035_label(const std::string& s) {
    static const std::regex re("^[a-z]([-a-z0-9]*[a-z0-9])?$");
    return !s.empty() && s.size() <= 63 && std::regex_match(s, re);
}

bool is_dns1123_label(const std::string& s) {
    static const std::regex re("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$");
    return !s.empty() && s.size() <= 63 && std::regex_match(s, re);
}

bool is_dns1123_subdomain(const std::string& s) {
    static const std::regex re("^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$");
    return !s.empty() && s.size() <= 253 && std::regex_match(s, re);
}

std::string longest_pod_hostname(const JobSpec& s) {
    const int last = std::max(0, s.nodes - 1);
    switch (s.kind) {
        case Kind::IndexedJob:
        case Kind::StatefulSet:
            return fmt::format("{}-{}", s.name, last);
        case Kind::JobSet:
        case Kind::TrainJob:  // the Trainer creates a JobSet with one replicated job named "node"
            return fmt::format("{}-node-0-{}", s.name, last);
        case Kind::PyTorchJob:
            return s.nodes > 1 ? fmt::format("{}-worker-{}", s.name, s.nodes - 2) : s.name + "-master-0";
    }
    return s.name;
}

namespace {

// A Kubernetes quantity (what resources.requests accepts): 2, 500m, 1.5, 4Gi, 8G, 1e3.
bool is_quantity(const std::string& s) {
    static const std::regex re(R"(^[0-9]+(\.[0-9]+)?([eE][0-9]+|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$)");
    return std::regex_match(s, re);
}

bool is_env_name(const std::string& s) {
    static const std::regex re("^[-._a-zA-Z][-._a-zA-Z0-9]*$");
    return std::regex_match(s, re);
}

// Set by the launcher for each worker (docs/design.md §4) or by the operators; a user value would be
// overwritten or, worse, contradict the flags.
bool is_reserved_env(const std::string& s) {
    static const char* const kReserved[] = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                                            "MASTER_PORT", "JOB_COMPLETION_INDEX", "LLMTRAIN_POD_INDEX", "HF_TOKEN",
                                            "HUGGING_FACE_HUB_TOKEN"};
    for (const char* r : kReserved)
        if (s == r) return true;
    return s.rfind("PET_", 0) == 0 || s.rfind("TORCHELASTIC_", 0) == 0;
}

}  // namespace

JobSpec resolve(JobSpec s) {
    std::vector<std::string> errs;
    if (s.name.empty()) s.name = s.config_run_name;
    if (s.name.empty()) {
        errs.push_back(s.is_command() ? "no job name: pass --name"
                                      : "no job name: pass --name or set run.name in the config");
    } else if (!is_dns1035_label(s.name)) {
        errs.push_back(fmt::format(
            "name '{}' is not a DNS-1035 label (lowercase letters, digits and '-', starting with a letter, "
            "ending with a letter or digit, at most 63 characters){}",
            s.name, s.name == s.config_run_name ? "; it comes from run.name: pass --name" : ""));
    }
    if (!s.namespace_.empty() && !is_dns1123_label(s.namespace_))
        errs.push_back(fmt::format("--namespace '{}' is not a DNS-1123 label", s.namespace_));
    if (s.nodes < 1) errs.push_back(fmt::format("--nodes {}: need at least 1 node", s.nodes));
    if (s.nodes > 10000) errs.push_back(fmt::format("--nodes {}: more than 10000 nodes is not supported", s.nodes));
    if (s.gpus_per_node < 0) errs.push_back(fmt::format("--gpus-per-node {} is negative", s.gpus_per_node));
    if (s.nproc_per_node < 0) errs.push_back(fmt::format("--nproc-per-node {} is negative", s.nproc_per_node));

    if (s.gpus_per_node > 0 && s.config_device == "cpu")
        errs.push_back(fmt::format("--gpus-per-node {} requests GPUs but the config's run.device is cpu: set "
                                   "--set run.device=cuda (or auto), or drop --gpus-per-node",
                                   s.gpus_per_node));
    if (s.gpus_per_node == 0 && s.config_device == "cuda")
        errs.push_back("the config's run.device is cuda but no GPUs are requested: pass --gpus-per-node G");
    if (s.gpus_per_node > 0 && s.nproc_per_node > 0 && s.nproc_per_node != s.gpus_per_node)
        errs.push_back(fmt::format("--nproc-per-node {} with --gpus-per-node {}: each process drives one GPU, so "
                                   "they must be equal (or leave --nproc-per-node out)",
                                   s.nproc_per_node, s.gpus_per_node));
    if (s.nproc_per_node == 0) s.nproc_per_node = s.gpus_per_node > 0 ? s.gpus_per_node : 1;

    if (s.image.empty() ||
        std::any_of(s.image.begin(), s.image.end(), [](unsigned char c) { return std::isspace(c); }))
        errs.push_back(fmt::format("--image '{}' is not an image reference", s.image));
    if (s.launcher != "llmtrain" && s.launcher != "torchrun")
        errs.push_back(fmt::format("--launcher '{}': expected llmtrain or torchrun", s.launcher));
    if (s.launcher == "torchrun" && s.kind != Kind::PyTorchJob && s.kind != Kind::TrainJob)
        errs.push_back(fmt::format("--launcher torchrun: only --kind pytorchjob and trainjob run torchrun (their "
                                   "operators set the PET_* variables it reads); a {} starts its workers with "
                                   "`llmtrain launch`",
                                   kind_name(s.kind)));
    if (s.max_restarts < 0) errs.push_back(fmt::format("--max-restarts {} is negative", s.max_restarts));
    if (s.grace_period_s < 0) errs.push_back(fmt::format("--grace-period {} is negative", s.grace_period_s));
    if (s.master_port < 1 || s.master_port > 65535)
        errs.push_back(fmt::format("--master-port {} is not a TCP port", s.master_port));
    for (const auto& [flag, v] : {std::pair<const char*, const std::string&>{"--data-pvc", s.data_pvc},
                                  {"--output-pvc", s.output_pvc},
                                  {"--models-pvc", s.models_pvc}})
        if (!v.empty() && !is_dns1123_subdomain(v))
            errs.push_back(fmt::format("{} '{}' is not a valid claim name (DNS-1123 subdomain)", flag, v));
    if (!s.hf_token_secret.empty()) {
        auto colon = s.hf_token_secret.find(':');
        std::string secret = s.hf_token_secret.substr(0, colon);
        std::string key = colon == std::string::npos ? "HF_TOKEN" : s.hf_token_secret.substr(colon + 1);
        if (!is_dns1123_subdomain(secret) || key.empty() || !is_env_name(key))
            errs.push_back(fmt::format("--hf-token-secret '{}': expected SECRET or SECRET:KEY", s.hf_token_secret));
    }
    if (!s.s3_secret.empty() && !is_dns1123_subdomain(s.s3_secret))
        errs.push_back(fmt::format("--s3-secret '{}': expected a Secret name (DNS-1123 subdomain)", s.s3_secret));
    for (const auto& [k, v] : s.env) {
        if (!is_env_name(k)) errs.push_back(fmt::format("--env {}={}: '{}' is not an env var name", k, v, k));
        if (k == "AWS_ACCESS_KEY_ID" || k == "AWS_SECRET_ACCESS_KEY" || k == "AWS_SESSION_TOKEN")
            errs.push_back(fmt::format("--env {}: credentials never go into the manifest's text; put them in a Secret "
                                       "and pass --s3-secret NAME",
                                       k));
        if (is_reserved_env(k))
            errs.push_back(fmt::format("--env {}: set by the launcher or the operator from the job's shape", k));
    }
    for (const auto& [k, v] : s.node_selector)
        if (k.empty()) errs.push_back(fmt::format("--node-selector ={}: empty label key", v));

    if (s.cpu.empty()) s.cpu = std::to_string(s.nproc_per_node * std::max(1, s.config_threads));
    if (s.memory.empty()) s.memory = fmt::format("{}Gi", 4 * s.nproc_per_node);
    if (!is_quantity(s.cpu))
        errs.push_back(fmt::format("--cpu '{}' is not a Kubernetes quantity (e.g. 4, 500m)", s.cpu));
    if (!is_quantity(s.memory))
        errs.push_back(fmt::format("--memory '{}' is not a Kubernetes quantity (e.g. 16Gi)", s.memory));

    if (is_dns1035_label(s.name) && s.nodes >= 1) {
        std::string host = longest_pod_hostname(s);
        if (host.size() > 63)
            errs.push_back(fmt::format("name '{}' is too long for {} nodes of a {}: pod host name '{}' has {} "
                                       "characters, at most 63 are allowed",
                                       s.name, s.nodes, kind_name(s.kind), host, host.size()));
        if (s.kind == Kind::StatefulSet && s.name.size() > 52)
            errs.push_back(fmt::format("name '{}' has {} characters; a StatefulSet name may have at most 52 (its "
                                       "controller-revision-hash label adds 11)",
                                       s.name, s.name.size()));
        if (s.name.size() + 7 > 253) errs.push_back("name too long for the ConfigMap name <name>-config");
    }

    if (!errs.empty()) {
        std::string msg = fmt::format("cannot render kind {} from these options:", kind_name(s.kind));
        for (const auto& e : errs) msg += "\n  - " + e;
        throw UsageError(msg);
    }
    return s;
}

// Debian's dataset packages in the image (deploy/Containerfile: dataset-fashion-mnist, data.source idx's
// default): their files are in every pod without a volume.
constexpr const char* kImageDatasetsDir = "/usr/share/datasets/";

std::vector<std::string> warnings(const JobSpec& s) {
    std::vector<std::string> w;
    if (s.output_pvc.empty() && s.config_sync.empty())
        w.push_back("no --output-pvc: /out is an emptyDir, so checkpoints and the run directory are lost with the "
                    "pod and a recreated pod starts over (or set output.sync: s3://... with --s3-secret)");
    if (!s.config_sync.empty() && s.s3_secret.empty())
        w.push_back(fmt::format("output.sync is {} but there is no --s3-secret: the pods have no AWS credentials "
                                "unless the image or the node provides them",
                                s.config_sync));
    for (const auto& [key, path] : s.config_data_paths) {
        if (path.empty() || path[0] == '/') continue;
        w.push_back(fmt::format("{} is relative ({}): in the pod it resolves against the container's working "
                                "directory; point it under /data (--set {}=/data/...)",
                                key, path, key));
    }
    if (s.data_pvc.empty())
        for (const auto& [key, path] : s.config_data_paths)
            if (path.rfind("/data/", 0) == 0)
                w.push_back(
                    fmt::format("{} is {}, under /data, but no --data-pvc mounts a volume there: the pods will "
                                "not find it",
                                key, path));
    if (!s.data_pvc.empty())
        for (const auto& [key, path] : s.config_data_paths)
            if (!path.empty() && path[0] == '/' && path.rfind("/data/", 0) != 0 && path.rfind("/models/", 0) != 0 &&
                path.rfind(kImageDatasetsDir, 0) != 0)
                w.push_back(fmt::format("{} is {}, outside the /data volume", key, path));
    return w;
}

}  // namespace llmt::k8s
