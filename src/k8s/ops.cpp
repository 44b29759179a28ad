// See ops.h. Pods are found by label selector (render.h Names::pod_selector) and ranked by the index
// their controller stamps on them: batch.kubernetes.io/job-completion-index (Indexed Job, JobSet,
// TrainJob), apps.kubernetes.io/pod-index (StatefulSet), training.kubeflow.org/replica-type+index
// (PyTorchJob: master 0, worker i -> i+1), else the name's trailing -N.
#include "k8s/ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "core/json_parse.h"
#include "k8s/render.h"
#include "k8s/yaml_emit.h"

namespace llmt::k8s {

namespace {

// kubectl's output describes objects other users made too: bounded like any input that is not ours
// (a list of many pods runs to megabytes; object nesting is a few dozen levels at most).
Json parse_json(const std::string& text, const std::string& what) {
    try {
        return parse_ordered_json(text, "output", {std::size_t{256} << 20, 128, true});
    } catch (const JsonParseError& e) {
        throw Error(fmt::format("kubectl {} did not print JSON: {}", what, e.what()));
    }
}

std::optional<int> to_int(const std::string& s) {
    if (s.empty() || s.size() > 9 || !std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); }))
        return std::nullopt;
    return std::stoi(s);
}

std::string str_at(const Json& j, const Json::json_pointer& p) {
    return j.contains(p) && j.at(p).is_string() ? j.at(p).get<std::string>() : std::string();
}

std::vector<PodStatus> list_pods(const Kubectl& k, Kind kind, const std::string& name) {
    const Names n = names_for(kind, name);
    Json list = parse_json(k.check({"get", "pods", "-l", n.pod_selector, "-o", "json"}), "get pods");
    std::vector<PodStatus> pods;
    for (const auto& item : list.value("items", Json::array())) pods.push_back(pod_status(kind, item));
    std::stable_sort(pods.begin(), pods.end(), [](const PodStatus& a, const PodStatus& b) {
        return a.rank != b.rank ? a.rank < b.rank : a.created < b.created;
    });
    return pods;
}

}  // namespace

std::string workload_resource(Kind kind) {
    switch (kind) {
        case Kind::IndexedJob: return "job.batch";
        case Kind::JobSet: return "jobset.jobset.x-k8s.io";
        case Kind::TrainJob: return "trainjob.trainer.kubeflow.org";
        case Kind::PyTorchJob: return "pytorchjob.kubeflow.org";
        case Kind::StatefulSet: return "statefulset.apps";
    }
    return "";
}

std::string submit(const Kubectl& k, const JobSpec& s, bool dry_run) {
    std::vector<std::string> args = {"apply", "-f", "-"};
    if (dry_run) args.push_back("--dry-run=server");
    return k.check(args, to_yaml_stream(render_objects(s)));
}

PodStatus pod_status(Kind kind, const Json& pod) {
    using P = Json::json_pointer;
    PodStatus p;
    p.name = str_at(pod, P("/metadata/name"));
    p.phase = str_at(pod, P("/status/phase"));
    p.node = str_at(pod, P("/spec/nodeName"));
    p.created = str_at(pod, P("/metadata/creationTimestamp"));
    const Json labels = pod.value(P("/metadata/labels"), Json::object());
    const Json annotations = pod.value(P("/metadata/annotations"), Json::object());
    auto get = [](const Json& m, const char* key) {
        return m.contains(key) && m[key].is_string() ? m[key].get<std::string>() : std::string();
    };
    std::optional<int> rank;
    switch (kind) {
        case Kind::IndexedJob:
        case Kind::JobSet:
        case Kind::TrainJob:
            rank = to_int(get(annotations, "batch.kubernetes.io/job-completion-index"));
            if (!rank) rank = to_int(get(labels, "batch.kubernetes.io/job-completion-index"));
            break;
        case Kind::StatefulSet:
            rank = to_int(get(labels, "apps.kubernetes.io/pod-index"));
            break;
        case Kind::PyTorchJob: {
            auto idx = to_int(get(labels, "training.kubeflow.org/replica-index"));
            std::string type = get(labels, "training.kubeflow.org/replica-type");
            if (idx && type == "master") rank = *idx;
            if (idx && type == "worker") rank = *idx + 1;
            break;
        }
    }
    if (!rank) {  // <name>-<N> (StatefulSet before 1.28) or <...>-<N>-<random>
        auto dash = p.name.rfind('-');
        if (dash != std::string::npos) rank = to_int(p.name.substr(dash + 1));
    }
    p.rank = rank.value_or(-1);
    for (const auto& cs : pod.value(P("/status/containerStatuses"), Json::array())) {
        p.restarts += cs.value("restartCount", 0);
        const Json state = cs.value("state", Json::object());
        if (state.contains("waiting")) p.reason = state["waiting"].value("reason", "");
        if (state.contains("terminated")) {
            p.reason = state["terminated"].value("reason", "");
            p.exit_code = state["terminated"].value("exitCode", 0);
        }
    }
    return p;
}

std::vector<PodStatus> latest_per_rank(std::vector<PodStatus> pods) {
    std::map<int, PodStatus> by_rank;
    for (auto& p : pods) {
        auto it = by_rank.find(p.rank);
        if (it == by_rank.end() || it->second.created <= p.created) by_rank[p.rank] = std::move(p);
    }
    std::vector<PodStatus> out;
    for (auto& [r, p] : by_rank) out.push_back(std::move(p));
    return out;
}

Json JobStatus::to_json() const {
    Json ps = Json::array();
    for (const auto& p : pods) {
        Json j = {{"rank", p.rank}, {"pod", p.name},     {"phase", p.phase},
                  {"node", p.node}, {"restarts", p.restarts}, {"reason", p.reason}};
        j["exit_code"] = p.exit_code ? Json(*p.exit_code) : Json(nullptr);
        ps.push_back(j);
    }
    return {{"kind", kind}, {"name", name}, {"condition", condition}, {"pods", ps}, {"metrics", metrics}};
}

JobStatus status(const Kubectl& k, Kind kind, const std::string& name) {
    JobStatus st;
    st.kind = kind_name(kind);
    st.name = name;
    Json w =
        parse_json(k.check({"get", workload_resource(kind), name, "-o", "json"}), "get " + workload_resource(kind));
    if (kind == Kind::StatefulSet) {
        st.condition = fmt::format("{}/{} ready", w.value(Json::json_pointer("/status/readyReplicas"), 0),
                                   w.value(Json::json_pointer("/spec/replicas"), 0));
    } else {
        std::vector<std::string> conds;
        for (const auto& c : w.value(Json::json_pointer("/status/conditions"), Json::array())) {
            if (c.value("status", "") != "True") continue;
            std::string s = c.value("type", "");
            std::string why = c.value("reason", "");
            std::string msg = c.value("message", "");
            if (!why.empty() || !msg.empty())
                s += fmt::format(" ({}{}{})", why, why.empty() || msg.empty() ? "" : ": ", msg);
            conds.push_back(s);
        }
        if (conds.empty()) {
            st.condition = "Running";
        } else {
            for (const auto& c : conds) st.condition += (st.condition.empty() ? "" : "; ") + c;
        }
    }
    st.pods = list_pods(k, kind, name);
    const Names n = names_for(kind, name);
    const PodStatus* rank0 = nullptr;
    for (const auto& p : st.pods)
        if (p.rank == 0 && p.phase == "Running") rank0 = &p;
    if (!rank0) {
        st.metrics =
            "(no running rank-0 pod to read /out/" + name + "/metrics.jsonl from; `llmtrain k8s fetch` copies it)";
    } else {
        KubectlResult r = k.run({"exec", rank0->name, "-c", n.container, "--", "tail", "-n", "1",
                                 fmt::format("{}/{}/metrics.jsonl", kOutDir, name)});
        std::string line = r.exit_code == 0 ? r.out : r.err;
        while (!line.empty() && line.back() == '\n') line.pop_back();
        st.metrics = r.exit_code == 0 ? line : fmt::format("(unavailable: {})", line);
    }
    return st;
}

int logs(const Kubectl& k, Kind kind, const std::string& name, bool follow, int rank, std::FILE* out) {
    const Names n = names_for(kind, name);
    std::vector<PodStatus> pods = latest_per_rank(list_pods(k, kind, name));
    if (rank >= 0) {
        pods.erase(std::remove_if(pods.begin(), pods.end(), [&](const PodStatus& p) { return p.rank != rank; }),
                   pods.end());
        if (pods.empty()) throw InputError(fmt::format("no pod of {} '{}' has rank {}", kind_name(kind), name, rank));
    }
    if (pods.empty()) throw Error(fmt::format("no pods match -l {} (not started yet, or deleted)", n.pod_selector));
    if (follow) {
        std::vector<std::pair<std::string, std::vector<std::string>>> cmds;
        for (const auto& p : pods)
            cmds.push_back({fmt::format("[rank {}] ", p.rank), {"logs", "--follow", p.name, "-c", n.container}});
        return k.stream_prefixed(cmds, out);
    }
    // Merge by kubectl's RFC 3339 timestamps (fixed width, so string order is time order); stable,
    // so lines of one rank keep their order.
    struct Line {
        std::string ts;
        int rank;
        std::string text;
    };
    std::vector<Line> lines;
    for (const auto& p : pods) {
        std::string text = k.check({"logs", "--timestamps", p.name, "-c", n.container});
        std::size_t start = 0;
        while (start < text.size()) {
            std::size_t nl = text.find('\n', start);
            if (nl == std::string::npos) nl = text.size();
            std::string line = text.substr(start, nl - start);
            start = nl + 1;
            auto sp = line.find(' ');
            if (sp == std::string::npos) lines.push_back({"", p.rank, line});
            else lines.push_back({line.substr(0, sp), p.rank, line.substr(sp + 1)});
        }
    }
    std::stable_sort(lines.begin(), lines.end(), [](const Line& a, const Line& b) { return a.ts < b.ts; });
    for (const auto& l : lines) fmt::print(out, "[rank {}] {}\n", l.rank, l.text);
    return 0;
}

std::string cancel(const Kubectl& k, Kind kind, const std::string& name) {
    const Names n = names_for(kind, name);
    std::vector<std::string> args = {"delete", "--ignore-not-found", "--wait=false",
                                     workload_resource(kind) + "/" + name};
    if (!n.service.empty() && kind != Kind::JobSet) args.push_back("service/" + n.service);
    args.push_back("configmap/" + n.configmap);
    return k.check(args);
}

std::string fetch(const Kubectl& k, Kind kind, const std::string& name, const std::string& dest, std::FILE* log) {
    const Names n = names_for(kind, name);
    const std::string remote = fmt::format("{}/{}", kOutDir, name);
    const std::string local = (std::filesystem::path(dest) / name).string();
    std::filesystem::create_directories(dest);
    auto cp_from = [&](const std::string& pod, const std::string& container) {
        std::string src = (k.namespace_name().empty() ? "" : k.namespace_name() + "/") + pod + ":" + remote;
        k.check({"cp", "-c", container, src, local});
    };
    std::vector<PodStatus> pods = list_pods(k, kind, name);
    for (const auto& p : pods) {
        if (p.phase != "Running") continue;
        fmt::print(log, "copying {} from running pod {}\n", remote, p.name);
        cp_from(p.name, n.container);
        return local;
    }
    if (pods.empty())
        throw Error(fmt::format("no pods match -l {}: nothing says which volume holds /out", n.pod_selector));
    // No running pod: mount the same claim in a helper pod (the job's own image has tar for kubectl cp).
    Json pod = parse_json(k.check({"get", "pod", pods.front().name, "-o", "json"}), "get pod");
    std::string claim, image;
    for (const auto& v : pod.value(Json::json_pointer("/spec/volumes"), Json::array()))
        if (v.value("name", "") == "out" && v.contains("persistentVolumeClaim"))
            claim = v["persistentVolumeClaim"].value("claimName", "");
    for (const auto& c : pod.value(Json::json_pointer("/spec/containers"), Json::array()))
        if (c.value("name", "") == n.container) image = c.value("image", "");
    if (claim.empty())
        throw InputError(fmt::format("pod {} has no PVC named 'out' (rendered without --output-pvc?): the run "
                                     "directory lived in the pod and cannot be fetched after it stopped",
                                     pods.front().name));
    const std::string helper = name + "-fetch";
    PodSpec spec;
    spec.restart_policy = "Never";
    spec.run_as_user = kImageUid;
    spec.fs_group = kImageUid;
    Container c;
    c.name = "fetch";
    c.image = image;
    c.command = {"sleep", "3600"};
    c.volume_mounts = {{"out", kOutDir, true}};
    spec.containers = {c};
    spec.volumes = {{"out", Volume::Source::Pvc, claim, true}};
    Json obj = {{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata",
                 ObjectMeta{helper, k.namespace_name(), {{"app.kubernetes.io/managed-by", "llmtrain"}}, {}}.to_json()},
                {"spec", spec.to_json()}};
    fmt::print(log, "no running pod of {}: starting helper pod {} with claim {}\n", name, helper, claim);
    k.check({"apply", "-f", "-"}, to_yaml(obj));
    try {
        k.check({"wait", "--for=condition=Ready", "pod/" + helper, "--timeout=300s"});
        cp_from(helper, "fetch");
    } catch (...) {
        k.run({"delete", "pod", helper, "--ignore-not-found", "--wait=false"});
        throw;
    }
    k.check({"delete", "pod", helper, "--ignore-not-found", "--wait=false"});
    return local;
}

}  // namespace llmt::k8s
