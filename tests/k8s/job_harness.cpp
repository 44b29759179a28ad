// Test harness (job_harness.h): the Indexed Job's manifests parsed strictly, its pods instantiated as the
// Job controller and kubelet would (k8s.io/kubernetes pkg/controller/job, pkg/kubelet/kubelet_pods.go:
// makeEnvironmentVariables), and a small Job controller running them through tests/k8s/pod_sandbox.sh.
#include "job_harness.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace llmt::testing::kjob {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void unsupported(const std::string& where, const std::string& what) {
    throw std::runtime_error(where + ": " + what);
}

// Every key of `n` must be one of `keys`: a field the harness does not know is an error, not a no-op.
void only(const YAML::Node& n, const std::string& where, std::initializer_list<const char*> keys) {
    if (!n.IsMap()) unsupported(where, "expected a mapping");
    for (const auto& kv : n) {
        const auto key = kv.first.as<std::string>();
        if (std::none_of(keys.begin(), keys.end(), [&](const char* k) { return key == k; }))
            unsupported(where + "." + key, "the harness does not implement this field");
    }
}

std::string str(const YAML::Node& n, const std::string& where) {
    if (!n || !n.IsScalar()) unsupported(where, "expected a string");
    return n.as<std::string>();
}
int integer(const YAML::Node& n, const std::string& where) {
    if (!n || !n.IsScalar()) unsupported(where, "expected an integer");
    try {
        return n.as<int>();
    } catch (const YAML::Exception&) {
        unsupported(where, "expected an integer, got '" + n.as<std::string>() + "'");
    }
}
bool boolean(const YAML::Node& n, const std::string& where) {
    if (!n || !n.IsScalar()) unsupported(where, "expected a boolean");
    return n.as<bool>();
}
std::vector<std::string> strings(const YAML::Node& n, const std::string& where) {
    std::vector<std::string> out;
    if (!n) return out;
    if (!n.IsSequence()) unsupported(where, "expected a list");
    for (std::size_t i = 0; i < n.size(); ++i) out.push_back(str(n[i], where + "[" + std::to_string(i) + "]"));
    return out;
}
std::map<std::string, std::string> string_map(const YAML::Node& n, const std::string& where) {
    std::map<std::string, std::string> out;
    if (!n) return out;
    if (!n.IsMap()) unsupported(where, "expected a mapping");
    for (const auto& kv : n)
        out[kv.first.as<std::string>()] = str(kv.second, where + "." + kv.first.as<std::string>());
    return out;
}

struct Meta {
    std::string name, ns;
    std::map<std::string, std::string> labels;
};
Meta metadata(const YAML::Node& n, const std::string& where) {
    only(n, where, {"name", "namespace", "labels", "annotations"});
    Meta m{str(n["name"], where + ".name"), n["namespace"] ? str(n["namespace"], where + ".namespace") : "",
           string_map(n["labels"], where + ".labels")};
    string_map(n["annotations"], where + ".annotations");  // informational on these objects
    return m;
}

// resources.requests/limits: quantities only; nothing enforces them here (no cgroups).
void resources(const YAML::Node& n, const std::string& where) {
    only(n, where, {"requests", "limits"});
    for (const char* k : {"requests", "limits"})
        for (const auto& [name, value] : string_map(n[k], where + "." + k))
            if (name != "cpu" && name != "memory" && name != "nvidia.com/gpu")
                unsupported(where + "." + k + "." + name, "unknown resource");
}

Container container(const YAML::Node& n, const std::string& where) {
    only(n, where,
         {"name", "image", "imagePullPolicy", "command", "args", "env", "ports", "resources", "volumeMounts"});
    Container c;
    c.name = str(n["name"], where + ".name");
    c.image = str(n["image"], where + ".image");
    c.command = strings(n["command"], where + ".command");
    c.args = strings(n["args"], where + ".args");
    if (c.command.empty())
        unsupported(where + ".command", "the image's entrypoint is not emulated: command is required");
    for (std::size_t i = 0; n["env"] && i < n["env"].size(); ++i) {
        const auto e = n["env"][i];
        const std::string w = where + ".env[" + std::to_string(i) + "]";
        only(e, w, {"name", "value", "valueFrom"});
        EnvVar v;
        v.name = str(e["name"], w + ".name");
        if (e["value"]) v.value = str(e["value"], w + ".value");
        if (const auto f = e["valueFrom"]) {
            only(f, w + ".valueFrom", {"fieldRef", "secretKeyRef"});
            if (const auto r = f["fieldRef"]) {
                only(r, w + ".valueFrom.fieldRef", {"fieldPath", "apiVersion"});
                v.field_path = str(r["fieldPath"], w + ".valueFrom.fieldRef.fieldPath");
            } else if (const auto s = f["secretKeyRef"]) {
                only(s, w + ".valueFrom.secretKeyRef", {"name", "key", "optional"});
                v.secret_name = str(s["name"], w + ".valueFrom.secretKeyRef.name");
                v.secret_key = str(s["key"], w + ".valueFrom.secretKeyRef.key");
                if (s["optional"]) v.optional = boolean(s["optional"], w + ".valueFrom.secretKeyRef.optional");
            }
        }
        c.env.push_back(v);
    }
    for (std::size_t i = 0; n["ports"] && i < n["ports"].size(); ++i)
        only(n["ports"][i], where + ".ports[" + std::to_string(i) + "]", {"name", "containerPort", "protocol"});
    if (n["resources"]) resources(n["resources"], where + ".resources");
    for (std::size_t i = 0; n["volumeMounts"] && i < n["volumeMounts"].size(); ++i) {
        const auto vm = n["volumeMounts"][i];
        const std::string w = where + ".volumeMounts[" + std::to_string(i) + "]";
        only(vm, w, {"name", "mountPath", "readOnly"});
        VolumeMount m{str(vm["name"], w + ".name"), str(vm["mountPath"], w + ".mountPath"), false};
        if (vm["readOnly"]) m.read_only = boolean(vm["readOnly"], w + ".readOnly");
        if (m.path.empty() || m.path[0] != '/' || m.path.find(':') != std::string::npos)
            unsupported(w + ".mountPath", "expected an absolute path without ':'");
        c.mounts.push_back(m);
    }
    return c;
}

void pod_spec(const YAML::Node& n, const std::string& where, JobManifest& j) {
    only(n, where,
         {"restartPolicy", "subdomain", "terminationGracePeriodSeconds", "securityContext", "containers", "volumes"});
    j.restart_policy = str(n["restartPolicy"], where + ".restartPolicy");
    if (j.restart_policy != "Never")
        unsupported(where + ".restartPolicy", "the harness recreates pods (Never); '" + j.restart_policy +
                                                  "' would restart containers in place");
    if (n["subdomain"]) j.subdomain = str(n["subdomain"], where + ".subdomain");
    if (n["terminationGracePeriodSeconds"])
        j.grace_period_s = integer(n["terminationGracePeriodSeconds"], where + ".terminationGracePeriodSeconds");
    if (const auto s = n["securityContext"]) {
        only(s, where + ".securityContext", {"runAsNonRoot", "runAsUser", "runAsGroup", "fsGroup"});
        if (s["runAsNonRoot"]) j.run_as_non_root = boolean(s["runAsNonRoot"], where + ".securityContext.runAsNonRoot");
        if (s["runAsUser"]) j.run_as_user = integer(s["runAsUser"], where + ".securityContext.runAsUser");
        if (s["runAsGroup"]) j.run_as_group = integer(s["runAsGroup"], where + ".securityContext.runAsGroup");
        if (s["fsGroup"]) j.fs_group = integer(s["fsGroup"], where + ".securityContext.fsGroup");
    }
    const auto cs = n["containers"];
    if (!cs || !cs.IsSequence() || cs.size() != 1)
        unsupported(where + ".containers", "the harness runs pods of exactly one container");
    j.container = container(cs[0], where + ".containers[0]");
    for (std::size_t i = 0; n["volumes"] && i < n["volumes"].size(); ++i) {
        const auto v = n["volumes"][i];
        const std::string w = where + ".volumes[" + std::to_string(i) + "]";
        only(v, w, {"name", "configMap", "persistentVolumeClaim", "emptyDir"});
        Volume vol;
        vol.name = str(v["name"], w + ".name");
        if (const auto c = v["configMap"]) {
            only(c, w + ".configMap", {"name", "defaultMode"});
            vol.type = "configMap";
            vol.ref = str(c["name"], w + ".configMap.name");
            if (c["defaultMode"]) vol.default_mode = integer(c["defaultMode"], w + ".configMap.defaultMode");
        } else if (const auto p = v["persistentVolumeClaim"]) {
            only(p, w + ".persistentVolumeClaim", {"claimName", "readOnly"});
            vol.type = "persistentVolumeClaim";
            vol.ref = str(p["claimName"], w + ".persistentVolumeClaim.claimName");
            if (p["readOnly"]) vol.read_only = boolean(p["readOnly"], w + ".persistentVolumeClaim.readOnly");
        } else if (const auto e = v["emptyDir"]) {
            if (e.IsMap()) only(e, w + ".emptyDir", {"medium", "sizeLimit"});
            vol.type = "emptyDir";
        } else {
            unsupported(w, "no volume source");
        }
        j.volumes.push_back(vol);
    }
}

void job_spec(const YAML::Node& n, const std::string& where, JobManifest& j) {
    only(n, where,
         {"completionMode", "completions", "parallelism", "backoffLimit", "backoffLimitPerIndex", "maxFailedIndexes",
          "podFailurePolicy", "template"});
    if (str(n["completionMode"], where + ".completionMode") != "Indexed")
        unsupported(where + ".completionMode", "the harness runs Indexed Jobs");
    j.completions = integer(n["completions"], where + ".completions");
    j.parallelism = n["parallelism"] ? integer(n["parallelism"], where + ".parallelism") : 1;
    if (n["backoffLimit"]) j.backoff_limit = integer(n["backoffLimit"], where + ".backoffLimit");
    if (n["backoffLimitPerIndex"])
        j.backoff_limit_per_index = integer(n["backoffLimitPerIndex"], where + ".backoffLimitPerIndex");
    if (n["maxFailedIndexes"]) j.max_failed_indexes = integer(n["maxFailedIndexes"], where + ".maxFailedIndexes");
    if (const auto p = n["podFailurePolicy"]) {
        only(p, where + ".podFailurePolicy", {"rules"});
        for (std::size_t i = 0; i < p["rules"].size(); ++i) {
            const auto r = p["rules"][i];
            const std::string w = where + ".podFailurePolicy.rules[" + std::to_string(i) + "]";
            only(r, w, {"action", "onExitCodes", "onPodConditions"});
            FailureRule rule;
            rule.action = str(r["action"], w + ".action");
            if (rule.action != "FailJob" && rule.action != "Ignore" && rule.action != "Count" &&
                rule.action != "FailIndex")
                unsupported(w + ".action", "unknown action '" + rule.action + "'");
            if (const auto e = r["onExitCodes"]) {
                only(e, w + ".onExitCodes", {"containerName", "operator", "values"});
                if (e["containerName"]) rule.container = str(e["containerName"], w + ".onExitCodes.containerName");
                rule.op = str(e["operator"], w + ".onExitCodes.operator");
                if (rule.op != "In" && rule.op != "NotIn") unsupported(w + ".onExitCodes.operator", "In or NotIn");
                for (std::size_t k = 0; k < e["values"].size(); ++k)
                    rule.codes.push_back(integer(e["values"][k], w + ".onExitCodes.values"));
            }
            for (std::size_t k = 0; r["onPodConditions"] && k < r["onPodConditions"].size(); ++k) {
                const auto c = r["onPodConditions"][k];
                only(c, w + ".onPodConditions[" + std::to_string(k) + "]", {"type", "status"});
                if (c["status"] && str(c["status"], w + ".onPodConditions.status") != "True")
                    unsupported(w + ".onPodConditions.status", "only \"True\" is implemented");
                rule.conditions.push_back(str(c["type"], w + ".onPodConditions.type"));
            }
            if (rule.op.empty() && rule.conditions.empty())
                unsupported(w, "a rule needs onExitCodes or onPodConditions");
            j.rules.push_back(rule);
        }
    }
    const auto t = n["template"];
    only(t, where + ".template", {"metadata", "spec"});
    if (const auto tm = t["metadata"]) {
        only(tm, where + ".template.metadata", {"labels", "annotations"});
        j.pod_labels = string_map(tm["labels"], where + ".template.metadata.labels");
        j.pod_annotations = string_map(tm["annotations"], where + ".template.metadata.annotations");
    }
    pod_spec(t["spec"], where + ".template.spec", j);
}

const std::string kFieldLabels = "metadata.labels['", kFieldAnnotations = "metadata.annotations['";

std::string random_suffix(std::mt19937& rng) {
    // The alphabet of k8s.io/apimachinery/pkg/util/rand.String (no vowels, no 0/1/3).
    static const char* a = "bcdfghjklmnpqrstvwxz2456789";
    std::string s;
    for (int i = 0; i < 5; ++i) s += a[rng() % 27];
    return s;
}

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// kubelet's fsGroup ownership management (pkg/volume/volume_linux.go SetVolumeOwnership): group = fsGroup,
// group read/write (and execute where the owner has it), setgid on directories.
void apply_fs_group(const fs::path& root, int64_t gid) {
    auto one = [&](const fs::path& p) {
        struct stat st {};
        if (::lstat(p.c_str(), &st) != 0 || S_ISLNK(st.st_mode)) return;
        if (::lchown(p.c_str(), static_cast<uid_t>(-1), static_cast<gid_t>(gid)) != 0)
            throw std::runtime_error("fsGroup: chown " + p.string() + " failed");
        mode_t mode = st.st_mode | S_IRGRP | S_IWGRP;
        if (st.st_mode & S_IXUSR) mode |= S_IXGRP;
        if (S_ISDIR(st.st_mode)) mode |= S_ISGID;
        ::chmod(p.c_str(), mode & 07777);
    };
    one(root);
    for (const auto& e : fs::recursive_directory_iterator(root)) one(e.path());
}

}  // namespace

Manifests parse_manifests(const std::string& yaml) {
    Manifests m;
    bool have_job = false;
    std::string ns;
    auto same_ns = [&](const std::string& obj, const std::string& n) {
        const std::string v = n.empty() ? "default" : n;
        if (!ns.empty() && v != ns) unsupported(obj, "objects in different namespaces");
        ns = v;
    };
    for (const auto& doc : YAML::LoadAll(yaml)) {
        if (doc.IsNull()) continue;
        const std::string kind = str(doc["kind"], "kind"), api = str(doc["apiVersion"], "apiVersion");
        const std::string name =
            doc["metadata"] && doc["metadata"]["name"] ? doc["metadata"]["name"].as<std::string>() : "?";
        const std::string where = kind + " " + name;
        if (kind == "ConfigMap" && api == "v1") {
            only(doc, where, {"apiVersion", "kind", "metadata", "data"});
            const auto meta = metadata(doc["metadata"], where + ": metadata");
            same_ns(where, meta.ns);
            m.config_maps[meta.name] = string_map(doc["data"], where + ": data");
        } else if (kind == "Service" && api == "v1") {
            only(doc, where, {"apiVersion", "kind", "metadata", "spec"});
            const auto meta = metadata(doc["metadata"], where + ": metadata");
            same_ns(where, meta.ns);
            const auto s = doc["spec"];
            only(s, where + ": spec", {"clusterIP", "publishNotReadyAddresses", "selector", "ports"});
            if (str(s["clusterIP"], where + ": spec.clusterIP") != "None")
                unsupported(where + ": spec.clusterIP", "only headless Services (None) are implemented");
            // Without it, DNS holds only Ready pods and these pods have no readiness: nobody finds rank 0.
            if (!s["publishNotReadyAddresses"] || !boolean(s["publishNotReadyAddresses"], where))
                unsupported(where + ": spec.publishNotReadyAddresses",
                            "must be true: the pods have no readiness probe, DNS would hold no addresses");
            for (std::size_t i = 0; s["ports"] && i < s["ports"].size(); ++i)
                only(s["ports"][i], where + ": spec.ports[" + std::to_string(i) + "]",
                     {"name", "port", "targetPort", "protocol"});
            m.services.push_back({meta.name, string_map(s["selector"], where + ": spec.selector")});
        } else if (kind == "Job" && api == "batch/v1") {
            if (have_job) unsupported(where, "more than one Job");
            have_job = true;
            only(doc, where, {"apiVersion", "kind", "metadata", "spec"});
            const auto meta = metadata(doc["metadata"], where + ": metadata");
            same_ns(where, meta.ns);
            m.job.name = meta.name;
            job_spec(doc["spec"], where + ": spec", m.job);
        } else {
            unsupported(
                where, "the harness runs ConfigMaps, headless Services and one batch/v1 Job, not " + api + " " + kind);
        }
    }
    if (!have_job) throw std::runtime_error("no batch/v1 Job in the manifests");
    m.job.ns = ns;
    // The pods' DNS names <host>.<subdomain> exist only if a headless Service of that name selects them.
    if (!m.job.subdomain.empty()) {
        auto it = std::find_if(m.services.begin(), m.services.end(),
                               [&](const Service& s) { return s.name == m.job.subdomain; });
        if (it == m.services.end())
            unsupported("Job " + m.job.name + ": spec.template.spec.subdomain",
                        "no headless Service '" + m.job.subdomain + "'");
        for (const auto& [k, v] : it->selector) {
            auto l = m.job.pod_labels.find(k);
            if (l == m.job.pod_labels.end() || l->second != v)
                unsupported("Service " + it->name + ": spec.selector." + k, "does not select the Job's pods");
        }
    }
    return m;
}

std::string expand(const std::string& s, const std::map<std::string, std::string>& vars) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '$' || i + 1 >= s.size()) {
            out += s[i];
            continue;
        }
        if (s[i + 1] == '$') {
            out += '$';
            ++i;
        } else if (s[i + 1] == '(') {
            auto close = s.find(')', i + 2);
            if (close == std::string::npos) {
                out += s.substr(i);
                break;
            }
            const std::string name = s.substr(i + 2, close - i - 2);
            auto it = vars.find(name);
            out += it != vars.end() ? it->second : s.substr(i, close - i + 1);
            i = close;
        } else {
            out += s[i];
        }
    }
    return out;
}

PodLaunch instantiate(const Manifests& m, const PodIdentity& pod, const ClusterInputs& in, const fs::path& scratch) {
    const auto& j = m.job;
    const auto& c = j.container;
    const std::string where = "pod " + pod.name;
    PodLaunch p;
    // The Job controller (pkg/controller/job/indexed_job_utils.go): hostname <job>-<index>, the index as an
    // annotation and a label, the job's labels, and with backoffLimitPerIndex the index's failure count.
    p.hostname = j.name + "-" + std::to_string(pod.index);
    auto labels = j.pod_labels;
    auto annotations = j.pod_annotations;
    const std::string idx = std::to_string(pod.index);
    annotations["batch.kubernetes.io/job-completion-index"] = idx;
    labels["batch.kubernetes.io/job-completion-index"] = idx;
    labels["batch.kubernetes.io/job-name"] = labels["job-name"] = j.name;
    labels["batch.kubernetes.io/controller-uid"] = labels["controller-uid"] = "00000000-0000-4000-8000-00000000j0b0";
    if (j.backoff_limit_per_index)
        annotations["batch.kubernetes.io/job-index-failure-count"] = std::to_string(pod.failures);

    auto field = [&](const std::string& path, const std::string& w) -> std::string {
        auto keyed = [&](const std::string& prefix,
                         const std::map<std::string, std::string>& from) -> std::optional<std::string> {
            if (path.rfind(prefix, 0) != 0 || path.size() < prefix.size() + 2 || path.substr(path.size() - 2) != "']")
                return std::nullopt;
            auto it = from.find(path.substr(prefix.size(), path.size() - prefix.size() - 2));
            return it == from.end() ? std::string() : it->second;  // an absent key reads as ""
        };
        if (path == "metadata.name") return pod.name;
        if (path == "metadata.namespace") return j.ns;
        if (path == "metadata.uid") return pod.uid;
        if (path == "status.podIP" || path == "status.podIPs") return pod.ip;
        if (path == "spec.serviceAccountName") return "default";
        if (auto v = keyed(kFieldLabels, labels)) return *v;
        if (auto v = keyed(kFieldAnnotations, annotations)) return *v;
        unsupported(w, "fieldRef '" + path + "' has no value in this harness (no node)");
    };

    // Environment as the kubelet builds it: the image's ENV, HOSTNAME from the runtime, then the
    // container's env in order, each value expanded with the variables defined before it.
    std::vector<EnvVar> env = c.env;
    if (std::none_of(env.begin(), env.end(), [](const EnvVar& e) { return e.name == "JOB_COMPLETION_INDEX"; })) {
        EnvVar e;  // pkg/controller/job: added to every container of an Indexed Job's pods
        e.name = "JOB_COMPLETION_INDEX";
        e.field_path = "metadata.annotations['batch.kubernetes.io/job-completion-index']";
        env.push_back(e);
    }
    std::map<std::string, std::string> defined;  // the container's env, for $(VAR)
    std::vector<std::pair<std::string, std::string>> ordered = in.image_env;
    ordered.emplace_back("HOSTNAME", p.hostname);
    for (std::size_t i = 0; i < env.size(); ++i) {
        const auto& e = env[i];
        const std::string w = where + ": env " + e.name;
        std::optional<std::string> v;
        if (e.value) {
            v = expand(*e.value, defined);
        } else if (!e.field_path.empty()) {
            v = field(e.field_path, w);
        } else if (!e.secret_name.empty()) {
            auto s = in.secrets.find(e.secret_name);
            if (s != in.secrets.end() && s->second.count(e.secret_key)) {
                v = s->second.at(e.secret_key);
            } else if (!e.optional) {
                unsupported(w, "secret " + e.secret_name + " key " + e.secret_key +
                                   " is not provided (Kubernetes: CreateContainerConfigError)");
            }
        } else {
            v = "";
        }
        if (!v) continue;
        defined[e.name] = *v;
        ordered.emplace_back(e.name, *v);
    }
    // Later definitions win, keeping the first position (a container env entry overrides the image's).
    for (const auto& [k, v] : ordered) {
        auto it = std::find_if(p.env.begin(), p.env.end(), [&](const auto& kv) { return kv.first == k; });
        if (it != p.env.end()) it->second = v;
        else p.env.emplace_back(k, v);
    }
    for (const auto& a : c.command) p.argv.push_back(expand(a, defined));
    for (const auto& a : c.args) p.argv.push_back(expand(a, defined));

    // Security context.
    if (j.run_as_non_root && (!j.run_as_user || *j.run_as_user == 0))
        unsupported(where + ": securityContext.runAsNonRoot", "needs a non-zero runAsUser here (no image user)");
    p.uid = j.run_as_user;
    p.gid = j.run_as_group;
    if (j.fs_group) p.groups.push_back(*j.fs_group);

    // Volumes.
    for (const auto& vm : c.mounts) {
        auto v =
            std::find_if(j.volumes.begin(), j.volumes.end(), [&](const Volume& x) { return x.name == vm.volume; });
        if (v == j.volumes.end()) unsupported(where + ": volumeMount " + vm.path, "no volume '" + vm.volume + "'");
        Bind b{{}, vm.path, vm.read_only || v->read_only};
        if (v->type == "configMap") {
            auto cm = m.config_maps.find(v->ref);
            if (cm == m.config_maps.end())
                unsupported(where + ": volume " + v->name, "ConfigMap '" + v->ref + "' is not in the manifests");
            b.src = scratch / ("configmap-" + v->name);
            fs::create_directories(b.src);
            ::chmod(b.src.c_str(), 0755);
            for (const auto& [key, data] : cm->second) {
                const fs::path f = b.src / key;
                std::ofstream(f, std::ios::binary) << data;
                ::chmod(f.c_str(), static_cast<mode_t>(v->default_mode));
                if (j.fs_group) (void)::chown(f.c_str(), static_cast<uid_t>(-1), static_cast<gid_t>(*j.fs_group));
            }
        } else if (v->type == "persistentVolumeClaim") {
            auto claim = in.claims.find(v->ref);
            if (claim == in.claims.end())
                unsupported(where + ": volume " + v->name,
                            "claim '" + v->ref + "' is not bound (Kubernetes: Pending)");
            b.src = claim->second;
            if (j.fs_group && !b.read_only) apply_fs_group(b.src, *j.fs_group);
        } else {
            b.src = scratch / ("emptydir-" + v->name);
            fs::create_directories(b.src);
            ::chmod(b.src.c_str(), 0777);
        }
        p.binds.push_back(b);
    }
    return p;
}

Action on_pod_failure(const JobManifest& job, const std::string& container, int exit_code,
                      const std::vector<std::string>& pod_conditions) {
    auto action = [](const std::string& a) {
        return a == "FailJob"     ? Action::FailJob
               : a == "Ignore"    ? Action::Ignore
               : a == "FailIndex" ? Action::FailIndex
                                  : Action::Count;
    };
    for (const auto& r : job.rules) {
        if (!r.op.empty()) {
            if (!r.container.empty() && r.container != container) continue;
            const bool in = std::find(r.codes.begin(), r.codes.end(), exit_code) != r.codes.end();
            if (r.op == "In" ? in : !in) return action(r.action);
        }
        for (const auto& c : r.conditions)
            if (std::find(pod_conditions.begin(), pod_conditions.end(), c) != pod_conditions.end())
                return action(r.action);
    }
    return Action::Count;
}

const char* to_string(Action a) {
    switch (a) {
        case Action::Count: return "Count";
        case Action::Ignore: return "Ignore";
        case Action::FailJob: return "FailJob";
        case Action::FailIndex: return "FailIndex";
    }
    return "?";
}

// ---- JobRunner --------------------------------------------------------------------------------------------

JobRunner::JobRunner(Manifests m, ClusterInputs in, fs::path work, double backoff_base_s, PodRuntime runtime)
    : m_(std::move(m)),
      in_(std::move(in)),
      work_(std::move(work)),
      backoff_base_s_(backoff_base_s),
      runtime_(runtime) {
    script_ = fs::path(LLMT_SOURCE_DIR) / "tests/k8s/pod_sandbox.sh";
    const int n = m_.job.completions;
    failures_.assign(n, 0);
    state_.assign(n, 0);
    not_before_.assign(n, 0);
    index_ip_.assign(n, "");
    std::random_device rd;
    char buf[8];
    std::snprintf(buf, sizeof buf, "%05x", (static_cast<unsigned>(::getpid()) * 7919u + rd()) & 0xfffffu);
    id_ = buf;
    fs::create_directories(work_ / "pods");
}

JobRunner::~JobRunner() {
    for (auto& p : pods_) {
        if (!p.running) continue;
        signal_pod(p, "KILL");
        ::kill(p.pid, SIGKILL);
        ::waitpid(p.pid, nullptr, 0);
        p.running = false;
    }
    // EOF: the bridge process removes whatever is left (with podman, containers a killed pod left running).
    if (bridge_fd_ >= 0) ::close(bridge_fd_);
    if (bridge_pid_ > 0) ::waitpid(bridge_pid_, nullptr, 0);
}

bool JobRunner::start(std::string* skip_reason) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    bridge_pid_ = ::fork();
    if (bridge_pid_ == 0) {
        ::dup2(in[0], 0);
        ::dup2(out[1], 1);
        ::execlp("bash", "bash", script_.c_str(), "bridge", id_.c_str(),
                 runtime_ == PodRuntime::Podman ? "--podman" : static_cast<char*>(nullptr),
                 static_cast<char*>(nullptr));
        ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    bridge_fd_ = in[1];  // close-on-exec: no pod inherits it, so only this process keeps the bridge alive
    std::string line;
    char ch;
    while (::read(out[0], &ch, 1) == 1 && ch != '\n') line += ch;
    ::close(out[0]);
    if (line == "ready") {
        t0_ = now_s();
        write_hosts();
        return true;
    }
    int status = 0;
    ::waitpid(bridge_pid_, &status, 0);
    bridge_pid_ = -1;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77 && line.rfind("SKIP: ", 0) == 0) {
        if (skip_reason) *skip_reason = line;
        return false;
    }
    throw std::runtime_error("pod_sandbox.sh bridge failed: " + line);
}

void JobRunner::write_hosts() {
    // Rewritten in place (no rename: each pod's /etc/hosts is a bind of this inode) and truncated after
    // the write, so a concurrent reader never sees an empty file.
    std::string s = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n";
    for (int i = 0; i < m_.job.completions; ++i) {
        if (index_ip_[i].empty()) continue;
        const std::string host = m_.job.name + "-" + std::to_string(i);
        s += index_ip_[i] + "\t" + host;
        if (!m_.job.subdomain.empty())
            s += " " + host + "." + m_.job.subdomain + " " + host + "." + m_.job.subdomain + "." + m_.job.ns +
                 ".svc.cluster.local";
        s += "\n";
    }
    const fs::path f = work_ / "hosts";
    int fd = ::open(f.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || ::write(fd, s.data(), s.size()) != static_cast<ssize_t>(s.size()) ||
        ::ftruncate(fd, static_cast<off_t>(s.size())) != 0)
        throw std::runtime_error("cannot write " + f.string());
    ::close(fd);
}

void JobRunner::create_pod(int index) {
    static std::mt19937 rng(std::random_device{}());
    PodRecord r;
    r.index = index;
    r.attempt = static_cast<int>(
        std::count_if(pods_.begin(), pods_.end(), [&](const PodRecord& p) { return p.index == index; }));
    r.sandbox = sandboxes_++;
    r.name = m_.job.name + "-" + std::to_string(index) + "-" + random_suffix(rng);
    // A new pod gets a new IP, as a CNI usually gives; DNS (the shared hosts file) follows.
    r.ip = "10.214." + std::to_string(r.sandbox / 250) + "." + std::to_string(r.sandbox % 250 + 2);
    index_ip_[index] = r.ip;
    write_hosts();
    PodIdentity id{index, failures_[index], r.name,
                   "00000000-0000-4000-8000-" + std::to_string(100000000000 + r.sandbox), r.ip};
    const fs::path scratch = work_ / "pods" / r.name;
    fs::create_directories(scratch);
    const PodLaunch launch = instantiate(m_, id, in_, scratch);
    std::vector<std::string> argv = {"bash", script_.string(), "pod", id_, std::to_string(r.sandbox), r.ip + "/16",
                                     (work_ / "hosts").string(), "--hostname", launch.hostname};
    if (runtime_ == PodRuntime::Podman) argv.insert(argv.end(), {"--image", m_.job.container.image});
    if (launch.uid) {
        argv.insert(argv.end(),
                    {"--uid", std::to_string(*launch.uid), "--gid", std::to_string(launch.gid.value_or(0))});
        std::string g;
        for (auto x : launch.groups) g += (g.empty() ? "" : ",") + std::to_string(x);
        if (!g.empty()) argv.insert(argv.end(), {"--groups", g});
    }
    for (const auto& b : launch.binds)
        argv.insert(argv.end(), {"--mount", b.src.string() + ":" + b.dst + ":" + (b.read_only ? "ro" : "rw")});
    for (const auto& [k, v] : launch.env) argv.insert(argv.end(), {"--env", k + "=" + v});
    argv.push_back("--");
    argv.insert(argv.end(), launch.argv.begin(), launch.argv.end());
    r.log = work_ / "pods" / (r.name + ".log");
    {
        std::ofstream cmd(work_ / "pods" / (r.name + ".argv"));
        for (const auto& a : argv) cmd << a << "\n";
    }
    r.pid = ::fork();
    if (r.pid == 0) {
        int fd = ::open(r.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        int null = ::open("/dev/null", O_RDONLY);
        ::dup2(null, 0);
        std::vector<char*> a;
        for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
        a.push_back(nullptr);
        ::execvp(a[0], a.data());
        ::_exit(127);
    }
    r.running = true;
    state_[index] = 1;
    pods_.push_back(r);
}

bool JobRunner::step() {
    if (!outcome_.condition.empty()) return true;
    const double t = now_s() - t0_;
    for (auto& p : pods_) {
        if (!p.running) continue;
        int status = 0;
        if (::waitpid(p.pid, &status, WNOHANG) != p.pid) continue;
        p.running = false;
        p.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (p.exit_code == 0) {
            state_[p.index] = 2;
            continue;
        }
        p.action = on_pod_failure(m_.job, m_.job.container.name, p.exit_code, {});
        switch (p.action) {
            case Action::FailJob:
                state_[p.index] = 3;
                finish("Failed", "PodFailurePolicy");
                return true;
            case Action::Ignore:
                state_[p.index] = 0;  // recreated at once, not counted
                break;
            case Action::FailIndex:
                state_[p.index] = 3;
                break;
            case Action::Count: {
                const int f = ++failures_[p.index];
                ++total_failures_;
                if (m_.job.backoff_limit_per_index) {
                    state_[p.index] = f > *m_.job.backoff_limit_per_index ? 3 : 0;
                } else if (total_failures_ > m_.job.backoff_limit) {
                    finish("Failed", "BackoffLimitExceeded");
                    return true;
                } else {
                    state_[p.index] = 0;
                }
                not_before_[p.index] = t + std::min(360.0, backoff_base_s_ * std::pow(2.0, f - 1));
                break;
            }
        }
    }
    const int failed = static_cast<int>(std::count(state_.begin(), state_.end(), 3));
    const int succeeded = static_cast<int>(std::count(state_.begin(), state_.end(), 2));
    if (failed > 0 && (!m_.job.max_failed_indexes || failed > *m_.job.max_failed_indexes)) {
        finish("Failed", "FailedIndexes");
        return true;
    }
    if (succeeded + failed == m_.job.completions) {
        if (failed > 0) finish("Failed", "FailedIndexes");
        else finish("Complete", "");
        return true;
    }
    int active = static_cast<int>(std::count(state_.begin(), state_.end(), 1));
    for (int i = 0; i < m_.job.completions && active < m_.job.parallelism; ++i) {
        if (state_[i] == 0 && t >= not_before_[i]) {
            create_pod(i);
            ++active;
        }
    }
    return false;
}

void JobRunner::finish(const std::string& condition, const std::string& reason) {
    outcome_ = {condition, reason};
    terminate_active();
}

void JobRunner::terminate_active() {
    // The Job controller deletes the active pods; the kubelet sends SIGTERM and SIGKILL after the grace period.
    for (auto& p : pods_)
        if (p.running) signal_pod(p, "TERM");
    const double deadline = now_s() + std::min(m_.job.grace_period_s, 30);
    for (auto& p : pods_) {
        while (p.running) {
            int status = 0;
            if (::waitpid(p.pid, &status, WNOHANG) == p.pid) {
                p.running = false;
                p.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            } else if (now_s() > deadline) {
                kill_pod(p.index);
            } else {
                std::this_thread::sleep_for(std::chrono::milliseconds(100));
            }
        }
    }
}

JobOutcome JobRunner::wait(double timeout_s) {
    const double deadline = now_s() + timeout_s;
    while (!step()) {
        if (now_s() > deadline) {
            for (auto& p : pods_)
                if (p.running) kill_pod(p.index);
            for (auto& p : pods_)
                if (p.running) {
                    ::waitpid(p.pid, nullptr, 0);
                    p.running = false;
                }
            outcome_ = {"Timeout",
                        "the job did not finish within " + std::to_string(static_cast<int>(timeout_s)) + " s"};
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return outcome_;
}

bool JobRunner::kill_pod(int index) {
    for (auto& p : pods_) {
        if (p.index != index || !p.running) continue;
        signal_pod(p, "KILL");
        return true;
    }
    return false;
}

void JobRunner::signal_pod(const PodRecord& p, const char* sig) {
    std::system(("bash '" + script_.string() + "' signal " + id_ + " " + std::to_string(p.sandbox) + " " + sig +
                 (runtime_ == PodRuntime::Podman ? " --podman" : ""))
                    .c_str());
}

std::string JobRunner::logs() const {
    std::string out;
    for (const auto& p : pods_) {
        std::ifstream in(p.log);
        std::string line;
        while (std::getline(in, line)) out += "[" + p.name + "] " + line + "\n";
    }
    return out;
}

}  // namespace llmt::testing::kjob
