// Test harness: runs the Indexed Job that `llmtrain k8s render` prints (ConfigMap + headless Service +
// batch/v1 Job) without a cluster, doing what the Job controller and the kubelet would do with it: each
// pod in its own network/UTS/PID/mount namespaces (tests/k8s/pod_sandbox.sh), its command, args and env
// read from the manifest with $(VAR) references and downward-API fields filled in, its volumes bound at
// their mountPaths, and completions/parallelism/backoffLimitPerIndex/podFailurePolicy applied to pod exits.
//
// Mapping from the cluster to this machine (docs/kubernetes.md, "What was tested where"):
//   image             PodRuntime::HostRoot: the host's root filesystem under a tmpfs overlay (the
//                     container's writable layer), with the directory of the llmtrain under test first on
//                     the image's PATH; PodRuntime::Podman: the manifest's image, run by
//                     `podman --runtime runc run --pull never` joined to the pod's network namespace
//   pod IP / DNS      10.214.x.y on a private bridge; every pod's /etc/hosts (one shared file, rewritten in
//                     place when a recreated pod gets a new IP) holds <host>, <host>.<svc> and the FQDN of
//                     every pod, where a cluster has CoreDNS and the Service's records
//   PVC               a host directory per claim name (ClusterInputs::claims); fsGroup applied as the
//                     kubelet applies it (group ownership, g+rwX, setgid directories) unless read-only
//   ConfigMap volume  its keys written as files (defaultMode) in a per-pod directory
//   emptyDir          a per-pod directory, mode 0777
// Understood but not emulated (no kubelet, no cgroups): resources, imagePullPolicy, ports (only
// informational in Kubernetes). Any other field, and any downward-API field there is no value for, makes
// parse_manifests/instantiate throw naming it: the harness never silently ignores what it cannot do.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace llmt::testing::kjob {

struct EnvVar {
    std::string name;
    std::optional<std::string> value;        // value:
    std::string field_path;                  // valueFrom.fieldRef.fieldPath
    std::string secret_name, secret_key;     // valueFrom.secretKeyRef
    bool optional = false;
};
struct VolumeMount {
    std::string volume, path;
    bool read_only = false;
};
struct Volume {
    std::string name;
    std::string type;  // configMap | persistentVolumeClaim | emptyDir
    std::string ref;   // ConfigMap name or claim name
    bool read_only = false;
    int default_mode = 0644;
};
struct FailureRule {
    std::string action;                   // FailJob | Ignore | Count | FailIndex
    std::string container;                // onExitCodes.containerName (empty: any)
    std::string op;                       // onExitCodes.operator: In | NotIn (empty: no exit-code rule)
    std::vector<int> codes;
    std::vector<std::string> conditions;  // onPodConditions types with status "True"
};
struct Container {
    std::string name, image;
    std::vector<std::string> command, args;
    std::vector<EnvVar> env;
    std::vector<VolumeMount> mounts;
};
struct JobManifest {
    std::string name, ns = "default";
    int completions = 1, parallelism = 1;
    int backoff_limit = 6;  // Kubernetes' default
    std::optional<int> backoff_limit_per_index, max_failed_indexes;
    std::vector<FailureRule> rules;
    std::map<std::string, std::string> pod_labels, pod_annotations;
    std::string restart_policy, subdomain;
    int grace_period_s = 30;
    std::optional<int64_t> run_as_user, run_as_group, fs_group;
    bool run_as_non_root = false;
    Container container;
    std::vector<Volume> volumes;
};
struct Service {
    std::string name;
    std::map<std::string, std::string> selector;
};
struct Manifests {
    std::map<std::string, std::map<std::string, std::string>> config_maps;  // name -> data
    std::vector<Service> services;
    JobManifest job;
};

// Parses a YAML stream of ConfigMaps, headless Services and one Indexed Job. Throws std::runtime_error
// naming the field path ("Job tiny: spec.template.spec.hostNetwork: ...") for anything not implemented,
// and for a subdomain that no headless Service selecting the pods backs (the DNS names would not exist).
Manifests parse_manifests(const std::string& yaml);

// Kubernetes' $(VAR) expansion (k8s.io/kubernetes third_party/forked/golang/expansion): $(NAME) becomes
// vars[NAME] when defined and stays as written otherwise; $$ is a literal $.
std::string expand(const std::string& s, const std::map<std::string, std::string>& vars);

// One pod as the Job controller creates it.
struct PodIdentity {
    int index = 0;
    int failures = 0;  // failed pods of this index so far (annotation job-index-failure-count)
    std::string name, uid, ip;
};
// What the cluster would provide.
struct ClusterInputs {
    std::map<std::string, std::filesystem::path> claims;                       // claimName -> directory
    std::map<std::string, std::map<std::string, std::string>> secrets;         // name -> key -> value
    std::vector<std::pair<std::string, std::string>> image_env;                // the image's ENV (PATH, ...)
};
struct Bind {
    std::filesystem::path src;
    std::string dst;
    bool read_only = false;
};
struct PodLaunch {
    std::string hostname;
    std::vector<std::string> argv;                            // command + args, expanded
    std::vector<std::pair<std::string, std::string>> env;     // the container's whole environment, in order
    std::vector<Bind> binds;
    std::optional<int64_t> uid, gid;
    std::vector<int64_t> groups;
};
// The container of `pod`: env resolved (image env, HOSTNAME, JOB_COMPLETION_INDEX if the template lacks it,
// then the template's env in order), argv expanded, volumes prepared under `scratch`. Throws for a
// fieldRef, secret or ConfigMap Kubernetes could not resolve either (the pod would not start there).
PodLaunch instantiate(const Manifests& m, const PodIdentity& pod, const ClusterInputs& in,
                      const std::filesystem::path& scratch);

// What the Job controller does with a failed pod (podFailurePolicy rules in order; Count when none match).
enum class Action { Count, Ignore, FailJob, FailIndex };
Action on_pod_failure(const JobManifest& job, const std::string& container, int exit_code,
                      const std::vector<std::string>& pod_conditions);
const char* to_string(Action a);

// One pod's life.
struct PodRecord {
    int index = 0, attempt = 0, sandbox = 0;
    std::string name, ip;
    pid_t pid = -1;
    bool running = false;
    int exit_code = -1;  // the container's; 128+signal when killed
    Action action = Action::Count;
    std::filesystem::path log;
};
struct JobOutcome {
    std::string condition;  // Complete | Failed | Timeout
    std::string reason;     // PodFailurePolicy | FailedIndexes | BackoffLimitExceeded | ...
};

// How a pod's container runs (pod_sandbox.sh either way: the pod's network namespace, hosts file, volumes,
// user, env and command are the same): in pod_sandbox.sh's own UTS/PID/mount namespaces on the host's root
// filesystem, or from the manifest's container image with podman (container llmk-<sandbox_id>-<n>).
enum class PodRuntime { HostRoot, Podman };

// The Job controller for one Job, pods run by pod_sandbox.sh. Destruction kills every pod and removes
// every namespace (the bridge process also cleans up when this process dies: it watches a pipe).
class JobRunner {
public:
    // backoff_base_s: the controller's pod-recreation delay for the first failure (Kubernetes: 10 s,
    // doubling per failure of the index, at most 6 min).
    JobRunner(Manifests m, ClusterInputs in, std::filesystem::path work, double backoff_base_s,
              PodRuntime runtime = PodRuntime::HostRoot);
    ~JobRunner();
    JobRunner(const JobRunner&) = delete;
    JobRunner& operator=(const JobRunner&) = delete;

    // Creates the bridge; false (with the reason) where namespaces are unavailable: skip the test.
    bool start(std::string* skip_reason);
    // Reaps exited pods, applies the failure policy, creates due pods. Returns true once the Job finished.
    bool step();
    // step() until finished or timeout_s; on failure, terminates active pods (SIGTERM, then SIGKILL after
    // min(terminationGracePeriodSeconds, 30 s)).
    JobOutcome wait(double timeout_s);
    // kill -9 of every process of the index's running pod (a container crash); false if none runs.
    bool kill_pod(int index);

    const std::vector<PodRecord>& pods() const { return pods_; }
    const JobOutcome& outcome() const { return outcome_; }
    // Every pod's log, lines prefixed "[<pod name>] ", pods in creation order.
    std::string logs() const;
    const std::string& sandbox_id() const { return id_; }
    // The pod's network namespace, and with PodRuntime::Podman its container's name.
    std::string sandbox_name(const PodRecord& p) const { return "llmk-" + id_ + "-" + std::to_string(p.sandbox); }

private:
    void create_pod(int index);
    void write_hosts();
    void finish(const std::string& condition, const std::string& reason);
    void terminate_active();
    void signal_pod(const PodRecord& p, const char* sig);

    Manifests m_;
    ClusterInputs in_;
    std::filesystem::path work_, script_;
    double backoff_base_s_;
    PodRuntime runtime_;
    std::string id_;
    pid_t bridge_pid_ = -1;
    int bridge_fd_ = -1;
    int sandboxes_ = 0;
    std::vector<PodRecord> pods_;
    std::vector<int> failures_;          // per index, counted failures
    std::vector<int> state_;             // per index: 0 pending, 1 active, 2 succeeded, 3 failed
    std::vector<double> not_before_;     // per index: earliest recreation time (seconds since start)
    std::vector<std::string> index_ip_;  // per index: the latest pod's IP, for DNS
    int total_failures_ = 0;
    JobOutcome outcome_;
    double t0_ = 0;
};

}  // namespace llmt::testing::kjob
