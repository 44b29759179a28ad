// A small typed model of the pod-level Kubernetes objects llmtrain emits (core/v1 and batch/v1
// field names, https://kubernetes.io/docs/reference/kubernetes-api/). Only the fields we set; each
// to_json() writes keys in one fixed order so renders are deterministic. Workload objects (Job,
// JobSet, ...) are assembled from these in render.cpp.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace llmt::k8s {

using Json = nlohmann::ordered_json;
// Ordered key/value pairs (labels, selectors, resources): the order given is the order emitted.
using Pairs = std::vector<std::pair<std::string, std::string>>;

struct ObjectMeta {
    std::string name;
    std::string namespace_;  // empty: omitted (kubectl uses the context's namespace)
    Pairs labels;
    Pairs annotations;
    Json to_json() const;
};

// One env var: a literal value, a downward-API field, or a key of a Secret.
struct EnvVar {
    std::string name;
    std::string value;
    std::string field_path;                // e.g. metadata.annotations['batch.kubernetes.io/job-completion-index']
    std::string secret_name, secret_key;   // valueFrom.secretKeyRef
    bool secret_optional = false;
    Json to_json() const;

    static EnvVar literal(std::string n, std::string v) { return {std::move(n), std::move(v), {}, {}, {}, false}; }
    static EnvVar field(std::string n, std::string path) { return {std::move(n), {}, std::move(path), {}, {}, false}; }
    static EnvVar secret(std::string n, std::string name, std::string key) {
        return {std::move(n), {}, {}, std::move(name), std::move(key), false};
    }
};

struct VolumeMount {
    std::string name, mount_path;
    bool read_only = false;
    Json to_json() const;
};

struct Volume {
    enum class Source { Pvc, ConfigMap, EmptyDir, MemoryEmptyDir };
    std::string name;
    Source source = Source::EmptyDir;
    std::string ref;  // claimName or ConfigMap name
    bool read_only = false;
    Json to_json() const;
};

struct ContainerPort {
    std::string name;
    int port = 0;
    Json to_json() const;
};

struct Resources {
    Pairs requests, limits;
    Json to_json() const;
};

struct Container {
    std::string name, image, image_pull_policy;
    std::vector<std::string> command, args;
    std::vector<EnvVar> env;
    std::vector<ContainerPort> ports;
    Resources resources;
    std::vector<VolumeMount> volume_mounts;
    Json to_json() const;
};

struct Toleration {
    std::string key, op, value, effect;  // op: Exists | Equal
    Json to_json() const;
};

struct PodSpec {
    std::string restart_policy;  // Never | OnFailure | Always
    std::string hostname_subdomain;
    std::optional<int> termination_grace_period_s;
    std::optional<int64_t> run_as_user, fs_group;  // pod securityContext (non-root, writable PVCs)
    std::optional<bool> automount_service_account_token;  // unset: the cluster's default (mounted)
    Pairs node_selector;
    std::vector<Toleration> tolerations;
    std::vector<Container> containers;
    std::vector<Volume> volumes;
    Json to_json() const;
};

struct PodTemplate {
    Pairs labels, annotations;
    PodSpec spec;
    Json to_json() const;
};

Json pairs_to_json(const Pairs& p);

}  // namespace llmt::k8s
