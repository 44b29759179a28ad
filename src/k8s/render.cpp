// See render.h. Field choices and why:
// - Indexed Job: pods get host name <job>-<index> and, with `subdomain` = a headless Service that
//   publishes not-ready addresses, the DNS name <job>-<index>.<service>; rank 0's address is known
//   before any pod starts, so no API access (and no RBAC) is needed for discovery.
// - podFailurePolicy: our exit code 2 (bad input) fails the job at once; DisruptionTarget
//   (preemption, drain, eviction) does not count against backoffLimitPerIndex; other failures retry
//   that index, which resumes from /out/<job>/checkpoints via --resume auto. maxFailedIndexes 0: one
//   index out of retries fails the whole job (the other ranks cannot finish without it).
// - /dev/shm as a memory emptyDir on GPU pods: NCCL's shared-memory transport needs more than the
//   container runtime's 64 MB default.
#include "k8s/render.h"

#include <fmt/format.h>

#include "core/knobs.h"
#include "k8s/yaml_emit.h"

namespace llmt::k8s {

namespace {

Pairs object_labels(const std::string& job) {
    return {{"app.kubernetes.io/name", "llmtrain"},
            {"app.kubernetes.io/instance", job},
            {"app.kubernetes.io/managed-by", "llmtrain"}};
}

Pairs selector_labels(const std::string& job) {
    return {{"app.kubernetes.io/name", "llmtrain"}, {"app.kubernetes.io/instance", job}};
}

ObjectMeta meta(const JobSpec& s, const std::string& name) { return {name, s.namespace_, object_labels(s.name), {}}; }

Json object(const char* api_version, const char* kind, const ObjectMeta& m) {
    return {{"apiVersion", api_version}, {"kind", kind}, {"metadata", m.to_json()}};
}

std::pair<std::string, std::string> split_secret(const std::string& s) {
    auto colon = s.find(':');
    if (colon == std::string::npos) return {s, "HF_TOKEN"};
    return {s.substr(0, colon), s.substr(colon + 1)};
}

// Env shared by every kind: the HF token (both names the Hugging Face tools read), the object-storage
// Secret's AWS_* keys and --env.
std::vector<EnvVar> common_env(const JobSpec& s) {
    std::vector<EnvVar> env;
    if (!s.hf_token_secret.empty()) {
        auto [secret, key] = split_secret(s.hf_token_secret);
        env.push_back(EnvVar::secret("HF_TOKEN", secret, key));
        env.push_back(EnvVar::secret("HUGGING_FACE_HUB_TOKEN", secret, key));
    }
    // Object storage (output.sync, docs/object_storage.md): each variable from the Secret's key of the same
    // name; the two keys of a credential pair are required, the rest optional.
    if (!s.s3_secret.empty()) {
        const std::pair<const char*, bool> keys[] = {{"AWS_ACCESS_KEY_ID", false}, {"AWS_SECRET_ACCESS_KEY", false},
                                                     {"AWS_SESSION_TOKEN", true},  {"AWS_REGION", true},
                                                     {"AWS_ENDPOINT_URL", true}};
        for (const auto& [key, optional] : keys) {
            env.push_back(EnvVar::secret(key, s.s3_secret, key));
            env.back().secret_optional = optional;
        }
    }
    if (s.is_command()) {
        // server/jobs/command_job.h: what the program writes here are the job's metrics and outputs.
        const std::string out = std::string(kOutDir) + "/" + s.name;
        env.push_back(EnvVar::literal(location_name(Location::kMetricsFile), out + "/metrics.jsonl"));
        env.push_back(EnvVar::literal(location_name(Location::kOutputDir), out));
    }
    for (const auto& [k, v] : s.env) env.push_back(EnvVar::literal(k, v));
    return env;
}

std::vector<Volume> volumes(const JobSpec& s, const Names& n) {
    std::vector<Volume> v;
    if (!s.is_command()) v.push_back({"config", Volume::Source::ConfigMap, n.configmap, false});
    if (!s.data_pvc.empty()) v.push_back({"data", Volume::Source::Pvc, s.data_pvc, true});
    if (!s.output_pvc.empty()) {
        v.push_back({"out", Volume::Source::Pvc, s.output_pvc, false});
    } else {
        v.push_back({"out", Volume::Source::EmptyDir, "", false});
    }
    if (!s.models_pvc.empty()) v.push_back({"models", Volume::Source::Pvc, s.models_pvc, true});
    if (s.gpus_per_node > 0) v.push_back({"dshm", Volume::Source::MemoryEmptyDir, "", false});
    return v;
}

std::vector<VolumeMount> mounts(const JobSpec& s) {
    std::vector<VolumeMount> m;
    if (!s.is_command()) m.push_back({"config", kConfigDir, true});
    if (!s.data_pvc.empty()) m.push_back({"data", kDataDir, true});
    m.push_back({"out", kOutDir, false});
    if (!s.models_pvc.empty()) m.push_back({"models", kModelsDir, true});
    if (s.gpus_per_node > 0) m.push_back({"dshm", "/dev/shm", false});
    return m;
}

Resources resources(const JobSpec& s) {
    Resources r;
    r.requests = {{"cpu", s.cpu}, {"memory", s.memory}};
    r.limits = {{"memory", s.memory}};
    if (s.gpus_per_node > 0) {
        r.requests.push_back({"nvidia.com/gpu", std::to_string(s.gpus_per_node)});
        r.limits.push_back({"nvidia.com/gpu", std::to_string(s.gpus_per_node)});
    }
    return r;
}

// The pod every kind runs (TrainJob patches parts of it into the runtime's pod instead).
PodTemplate pod_template(const JobSpec& s, const Names& n, const std::string& restart_policy) {
    PodTemplate t;
    t.labels = object_labels(s.name);
    PodSpec& p = t.spec;
    p.restart_policy = restart_policy;
    p.termination_grace_period_s = s.grace_period_s;
    p.run_as_user = kImageUid;
    p.fs_group = kImageUid;
    p.node_selector = s.node_selector;
    // A command job's program is the submitter's: no API credentials of the namespace in its pod.
    if (s.is_command()) p.automount_service_account_token = false;
    if (s.gpus_per_node > 0) p.tolerations.push_back({"nvidia.com/gpu", "Exists", "", "NoSchedule"});
    Container c;
    c.name = n.container;
    c.image = s.image;
    c.image_pull_policy = s.image_pull_policy;
    c.command = {s.launcher == "torchrun" ? "torchrun" : "llmtrain"};
    c.args = s.launcher == "torchrun" ? torchrun_args(s) : launcher_args(s);
    if (s.kind == Kind::IndexedJob || s.kind == Kind::JobSet) {
        // The Job controller injects this too; declaring it makes $(JOB_COMPLETION_INDEX) in args an
        // expansion of a variable the manifest itself defines.
        c.env.push_back(
            EnvVar::field("JOB_COMPLETION_INDEX", "metadata.annotations['batch.kubernetes.io/job-completion-index']"));
    } else if (s.kind == Kind::StatefulSet) {
        // Kubernetes >= 1.28 labels StatefulSet pods with their ordinal; the launcher reads it from
        // LLMTRAIN_POD_INDEX (core/knobs.h's locations; launch/node_env.h) and falls back to the host name's
        // trailing -N where the label is missing (the downward API then gives "", read as unset).
        c.env.push_back(
            EnvVar::field(location_name(Location::kPodIndex), "metadata.labels['apps.kubernetes.io/pod-index']"));
    }
    for (auto& e : common_env(s)) c.env.push_back(std::move(e));
    c.ports.push_back({s.kind == Kind::PyTorchJob ? "pytorchjob-port" : "rendezvous", s.master_port});
    c.resources = resources(s);
    c.volume_mounts = mounts(s);
    p.containers.push_back(std::move(c));
    p.volumes = volumes(s, n);
    return t;
}

Json config_map(const JobSpec& s, const Names& n) {
    Json j = object("v1", "ConfigMap", meta(s, n.configmap));
    j["data"] = {{"config.yaml", s.config_yaml}};
    return j;
}

Json headless_service(const JobSpec& s, const Names& n) {
    Json j = object("v1", "Service", meta(s, n.service));
    j["spec"] = {{"clusterIP", "None"},
                 {"publishNotReadyAddresses", true},
                 {"selector", pairs_to_json(selector_labels(s.name))},
                 {"ports", Json::array({{{"name", "rendezvous"},
                                         {"port", s.master_port},
                                         {"targetPort", s.master_port},
                                         {"protocol", "TCP"}}})}};
    return j;
}

Json pod_failure_policy(const Names& n) {
    return {{"rules", Json::array({
                          {{"action", "FailJob"},
                           {"onExitCodes", {{"containerName", n.container}, {"operator", "In"}, {"values", {2}}}}},
                          {{"action", "Ignore"},
                           {"onPodConditions", Json::array({{{"type", "DisruptionTarget"}, {"status", "True"}}})}},
                      })}};
}

std::vector<Json> indexed_job(const JobSpec& s, const Names& n) {
    Json job = object("batch/v1", "Job", meta(s, s.name));
    PodTemplate t = pod_template(s, n, "Never");
    t.spec.hostname_subdomain = n.service;
    job["spec"] = {{"completionMode", "Indexed"},
                   {"completions", s.nodes},
                   {"parallelism", s.nodes},
                   {"backoffLimitPerIndex", s.max_restarts},
                   {"maxFailedIndexes", 0},
                   {"podFailurePolicy", pod_failure_policy(n)},
                   {"template", t.to_json()}};
    return {config_map(s, n), headless_service(s, n), job};
}

std::vector<Json> jobset(const JobSpec& s, const Names& n) {
    Json js = object("jobset.x-k8s.io/v1alpha2", "JobSet", meta(s, s.name));
    PodTemplate t = pod_template(s, n, "Never");
    // Inside the JobSet a failed pod fails its Job (backoffLimit 0) and the JobSet restarts all of
    // them, up to maxRestarts; a Job failed by our exit code 2 (reason PodFailurePolicy) ends it.
    Json job_spec = {{"completionMode", "Indexed"},
                     {"completions", s.nodes},
                     {"parallelism", s.nodes},
                     {"backoffLimit", 0},
                     {"podFailurePolicy", pod_failure_policy(n)},
                     {"template", t.to_json()}};
    js["spec"] = {
        {"network", {{"enableDNSHostnames", true}, {"subdomain", n.service}, {"publishNotReadyAddresses", true}}},
        {"failurePolicy",
         {{"maxRestarts", s.max_restarts},
          {"rules", Json::array({{{"name", "bad-input"},
                                  {"action", "FailJobSet"},
                                  {"onJobFailureReasons", Json::array({"PodFailurePolicy"})}}})}}},
        {"replicatedJobs",
         Json::array({{{"name", "node"},
                       {"replicas", 1},
                       {"template", {{"metadata", {{"labels", pairs_to_json(object_labels(s.name))}}},
                                     {"spec", job_spec}}}}})}};
    return {config_map(s, n), js};
}

std::vector<Json> trainjob(const JobSpec& s, const Names& n) {
    Json tj = object("trainer.kubeflow.org/v1alpha1", "TrainJob", meta(s, s.name));
    PodTemplate t = pod_template(s, n, "");
    const Container& c = t.spec.containers.at(0);
    Json trainer = {{"image", s.image},
                    {"command", c.command},
                    {"args", c.args},
                    {"numNodes", s.nodes},
                    {"numProcPerNode", s.nproc_per_node},
                    {"resourcesPerNode", c.resources.to_json()}};
    Json env = Json::array();
    for (const auto& e : c.env) env.push_back(e.to_json());
    if (!env.empty()) trainer["env"] = env;
    // Volumes, mounts, grace period, security context and placement are not TrainJob fields: they
    // go into the runtime's pod ("node" job, "node" container) through a runtime patch.
    Json mounts_j = Json::array();
    for (const auto& m : c.volume_mounts) mounts_j.push_back(m.to_json());
    Json volumes_j = Json::array();
    for (const auto& v : t.spec.volumes) volumes_j.push_back(v.to_json());
    Json pod = t.spec.to_json();
    Json pod_patch;
    pod_patch["terminationGracePeriodSeconds"] = s.grace_period_s;
    pod_patch["securityContext"] = pod["securityContext"];
    if (pod.contains("nodeSelector")) pod_patch["nodeSelector"] = pod["nodeSelector"];
    if (pod.contains("tolerations")) pod_patch["tolerations"] = pod["tolerations"];
    // automountServiceAccountToken is not a field a TrainJob runtime patch may set: its pods keep the
    // runtime's setting (docs/security.md "Command jobs").
    pod_patch["volumes"] = volumes_j;
    pod_patch["containers"] = Json::array({{{"name", n.container}, {"volumeMounts", mounts_j}}});
    Json patch = {{"manager", "llmtrain"},
                  {"trainingRuntimeSpec",
                   {{"template",
                     {{"spec",
                       {{"replicatedJobs",
                         Json::array({{{"name", "node"},
                                       {"template", {{"spec", {{"template", {{"spec", pod_patch}}}}}}}}})}}}}}}}};
    tj["spec"] = {{"runtimeRef", {{"name", "torch-distributed"}}},
                  {"trainer", trainer},
                  {"runtimePatches", Json::array({patch})}};
    return {config_map(s, n), tj};
}

std::vector<Json> pytorchjob(const JobSpec& s, const Names& n) {
    Json pj = object("kubeflow.org/v1", "PyTorchJob", meta(s, s.name));
    // OnFailure: the kubelet restarts a failed container in place (counted by runPolicy.backoffLimit);
    // the other ranks lose their peer, time out (dist.timeout_sec) and restart too, then all resume.
    Json tmpl = pod_template(s, n, "").to_json();
    Json replicas = {{"Master", {{"replicas", 1}, {"restartPolicy", "OnFailure"}, {"template", tmpl}}}};
    if (s.nodes > 1)
        replicas["Worker"] = {{"replicas", s.nodes - 1}, {"restartPolicy", "OnFailure"}, {"template", tmpl}};
    pj["spec"] = {{"nprocPerNode", std::to_string(s.nproc_per_node)},
                  {"runPolicy", {{"backoffLimit", s.max_restarts}, {"cleanPodPolicy", "None"}}},
                  {"pytorchReplicaSpecs", replicas}};
    return {config_map(s, n), pj};
}

std::vector<Json> statefulset(const JobSpec& s, const Names& n) {
    Json ss = object("apps/v1", "StatefulSet", meta(s, s.name));
    ss["spec"] = {{"serviceName", n.service},
                  {"replicas", s.nodes},
                  {"podManagementPolicy", "Parallel"},
                  {"selector", {{"matchLabels", pairs_to_json(selector_labels(s.name))}}},
                  {"template", pod_template(s, n, "Always").to_json()}};
    return {config_map(s, n), headless_service(s, n), ss};
}

}  // namespace

Names names_for(Kind kind, const std::string& job) {
    Names n;
    n.job = job;
    n.service = job;
    n.configmap = job + "-config";
    n.container = "trainer";
    n.pod_selector = "app.kubernetes.io/instance=" + job;
    switch (kind) {
        case Kind::IndexedJob:
        case Kind::StatefulSet:
            n.master_addr = fmt::format("{}-0.{}", job, n.service);
            break;
        case Kind::JobSet:
            n.master_addr = fmt::format("{}-node-0-0.{}", job, n.service);
            break;
        case Kind::TrainJob:
            n.container = "node";
            n.service = "";
            n.pod_selector = "jobset.sigs.k8s.io/jobset-name=" + job;
            break;
        case Kind::PyTorchJob:
            n.container = "pytorch";
            n.service = "";
            n.pod_selector = "training.kubeflow.org/job-name=" + job;
            break;
    }
    return n;
}

// `train ...` as every pod runs it: the mounted config, resume from /out, the run named after the job.
static std::vector<std::string> train_args(const JobSpec& s) {
    return {"train", "--config", kConfigPath, "--resume", "auto", "--set", "output.run_id=" + s.name, "--set",
            std::string("output.root_dir=") + kOutDir};
}

std::vector<std::string> launcher_args(const JobSpec& s) {
    const Names n = names_for(s.kind, s.name);
    std::vector<std::string> a = {"launch"};
    const std::string nnodes = std::to_string(s.nodes), nproc = std::to_string(s.nproc_per_node),
                      port = std::to_string(s.master_port);
    switch (s.kind) {
        case Kind::IndexedJob:
        case Kind::JobSet:
            a.insert(a.end(), {"--nnodes", nnodes, "--node-rank", "$(JOB_COMPLETION_INDEX)", "--nproc-per-node", nproc,
                               "--master-addr", n.master_addr, "--master-port", port});
            break;
        case Kind::StatefulSet:  // node rank from LLMTRAIN_POD_INDEX, else the host name's -N
            a.insert(a.end(), {"--nnodes", nnodes, "--nproc-per-node", nproc, "--master-addr", n.master_addr,
                               "--master-port", port});
            break;
        case Kind::TrainJob:  // everything from PET_* (the torch-distributed runtime sets them)
            break;
        case Kind::PyTorchJob:  // nodes, rank and master from PET_* / MASTER_ADDR, RANK, WORLD_SIZE
            a.insert(a.end(), {"--nproc-per-node", nproc});
            break;
    }
    // Restarts are Kubernetes' job (a recreated pod resumes); the launcher does not restart in place.
    if (s.is_command()) {
        a.insert(a.end(), {"--max-restarts", "0", "--no-python", "--"});
        a.insert(a.end(), s.command.begin(), s.command.end());
        return a;
    }
    a.insert(a.end(), {"--max-restarts", "0", "--"});
    for (auto& t : train_args(s)) a.push_back(std::move(t));
    return a;
}

std::vector<std::string> torchrun_args(const JobSpec& s) {
    std::vector<std::string> a;
    // PyTorchJob: nodes, rank and master from PET_*; TrainJob: the process count too (numProcPerNode).
    if (s.kind == Kind::PyTorchJob) a.insert(a.end(), {"--nproc-per-node", std::to_string(s.nproc_per_node)});
    if (s.is_command()) {  // torchrun runs the program itself (--no-python: python3 is named in the command)
        a.insert(a.end(), {"--max-restarts", "0", "--no-python"});
        a.insert(a.end(), s.command.begin(), s.command.end());
        return a;
    }
    a.insert(a.end(), {"--max-restarts", "0", "--no-python", "llmtrain"});
    for (auto& t : train_args(s)) a.push_back(std::move(t));
    return a;
}

std::vector<Json> render_objects(const JobSpec& s) {
    const Names n = names_for(s.kind, s.name);
    std::vector<Json> objects;
    switch (s.kind) {
        case Kind::IndexedJob: objects = indexed_job(s, n); break;
        case Kind::JobSet: objects = jobset(s, n); break;
        case Kind::TrainJob: objects = trainjob(s, n); break;
        case Kind::PyTorchJob: objects = pytorchjob(s, n); break;
        case Kind::StatefulSet: objects = statefulset(s, n); break;
    }
    // A command job has no config to mount.
    if (s.is_command()) std::erase_if(objects, [](const Json& o) { return o.value("kind", "") == "ConfigMap"; });
    return objects;
}

std::string render(const JobSpec& s) {
    std::string head = fmt::format(
        "# llmtrain k8s render: {} '{}', {} node(s) x {} process(es){}.\n"
        "# Apply with `kubectl apply -f <this file>` or run `llmtrain k8s submit` with the same options.\n",
        kind_name(s.kind), s.name, s.nodes, s.nproc_per_node,
        s.gpus_per_node > 0 ? fmt::format(", {} GPU(s) per node", s.gpus_per_node) : "");
    return head + to_yaml_stream(render_objects(s));
}

}  // namespace llmt::k8s
