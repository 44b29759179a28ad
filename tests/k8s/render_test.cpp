// Unit tests of src/k8s: YAML emission round-trips, JobSpec checks refuse what the issue lists, and
// each kind's objects carry the fields the environment contract (docs/design.md §4) depends on.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <yaml-cpp/yaml.h>

#include "core/error.h"
#include "k8s/job_spec.h"
#include "k8s/ops.h"
#include "k8s/render.h"
#include "k8s/yaml_emit.h"

namespace llmt::k8s {
namespace {

JobSpec cpu_spec(Kind kind, int nodes) {
    JobSpec s;
    s.kind = kind;
    s.name = "tiny";
    s.nodes = nodes;
    s.config_yaml = "schema_version: 1\nrun:\n  device: cpu\n";
    s.config_device = "cpu";
    s.output_pvc = "outputs";
    return resolve(s);
}

// yaml-cpp node -> ordered JSON with every scalar as a string, plus the tag info we need: a scalar
// that was quoted in the text has tag "!", a plain one "?".
Json to_json(const YAML::Node& n) {
    if (n.IsMap()) {
        Json j = Json::object();
        for (const auto& kv : n) j[kv.first.as<std::string>()] = to_json(kv.second);
        return j;
    }
    if (n.IsSequence()) {
        Json j = Json::array();
        for (const auto& v : n) j.push_back(to_json(v));
        return j;
    }
    return n.Tag() == "!" ? Json("str:" + n.as<std::string>()) : Json(n.as<std::string>());
}

TEST(K8sYaml, QuotesStringsThatWouldChangeType) {
    for (const char* s : {"2", "true", "True", "yes", "on", "off", "no", "null", "~", "", "1e3", "0755", "0x1F", "1.5",
                          "-3", ".inf", "1:20"})
        EXPECT_TRUE(needs_quotes(s)) << s;
    for (const char* s :
         {"4Gi", "500m", "llmtrain", "$(JOB_COMPLETION_INDEX)", "--nnodes", "-x", "a b", "tiny-0.tiny"})
        EXPECT_FALSE(needs_quotes(s)) << s;
}

TEST(K8sYaml, RoundTripsThroughYamlCpp) {
    Json doc = {{"a", "2"},           {"b", 2},          {"c", true},   {"d", "true"},
                {"e", "x\ny\n"},      {"f", Json::array()}, {"g", Json::object()},
                {"h", {{"k", "on"}}}, {"i", {"--", "train"}}};
    YAML::Node n = YAML::Load(to_yaml(doc));
    EXPECT_EQ(n["a"].Tag(), "!");  // quoted: stays a string
    EXPECT_EQ(n["b"].Tag(), "?");  // plain: an int
    EXPECT_EQ(n["b"].as<int>(), 2);
    EXPECT_TRUE(n["c"].as<bool>());
    EXPECT_EQ(n["d"].Tag(), "!");
    EXPECT_EQ(n["e"].as<std::string>(), "x\ny\n");
    EXPECT_TRUE(n["f"].IsSequence() && n["f"].size() == 0);
    EXPECT_TRUE(n["g"].IsMap() && n["g"].size() == 0);
    EXPECT_EQ(n["h"]["k"].Tag(), "!");
    EXPECT_EQ(n["i"][0].as<std::string>(), "--");
}

TEST(K8sYaml, KeyOrderIsInsertionOrder) {
    std::string y = to_yaml({{"zeta", 1}, {"alpha", 2}, {"mid", 3}});
    EXPECT_LT(y.find("zeta"), y.find("alpha"));
    EXPECT_LT(y.find("alpha"), y.find("mid"));
}

void expect_refused(JobSpec s, const std::string& fragment) {
    try {
        resolve(s);
        ADD_FAILURE() << "accepted; expected an error containing: " << fragment;
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
}

TEST(K8sSpec, RefusesInvalidCombinations) {
    JobSpec base;
    base.name = "tiny";
    base.config_device = "cpu";
    JobSpec s = base;
    s.nodes = 0;
    expect_refused(s, "--nodes 0: need at least 1 node");
    s = base;
    s.gpus_per_node = 8;
    expect_refused(s, "run.device is cpu");
    s = base;
    s.config_device = "cuda";
    expect_refused(s, "no GPUs are requested");
    s = base;
    s.config_device = "cuda";
    s.gpus_per_node = 8;
    s.nproc_per_node = 4;
    expect_refused(s, "must be equal");
    for (const char* bad : {"Tiny", "1tiny", "tiny_run", "tiny-", "a.b"}) {
        s = base;
        s.name = bad;
        expect_refused(s, "is not a DNS-1035 label");
    }
    s = base;
    s.name = "";
    expect_refused(s, "no job name");
    s = base;
    s.config_run_name = "gpt2_tiny";  // run.name is a fine run name but not a DNS label
    s.name = "";
    expect_refused(s, "pass --name");
    s = base;
    s.name = std::string(61, 'a');  // a label, but the host name <name>-10 has 64 characters
    s.nodes = 11;
    expect_refused(s, "pod host name");
    s = base;
    s.kind = Kind::StatefulSet;
    s.name = std::string(53, 'a');
    expect_refused(s, "at most 52");
    s = base;
    s.env = {{"RANK", "0"}};
    expect_refused(s, "set by the launcher");
    s = base;
    s.memory = "lots";
    expect_refused(s, "not a Kubernetes quantity");
    s = base;
    s.hf_token_secret = "Bad Secret";
    expect_refused(s, "--hf-token-secret");
    s = base;
    s.s3_secret = "Bad Secret";
    expect_refused(s, "--s3-secret");
    s = base;
    s.env = {{"AWS_SECRET_ACCESS_KEY", "literal"}};
    expect_refused(s, "--s3-secret");
}

TEST(K8sSpec, ErrorListsEveryProblem) {
    JobSpec s;
    s.name = "Bad";
    s.nodes = 0;
    s.gpus_per_node = 1;
    s.config_device = "cpu";
    try {
        resolve(s);
        FAIL();
    } catch (const UsageError& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("DNS-1035"), std::string::npos);
        EXPECT_NE(m.find("--nodes 0"), std::string::npos);
        EXPECT_NE(m.find("run.device is cpu"), std::string::npos);
    }
}

TEST(K8sSpec, Defaults) {
    JobSpec s;
    s.config_run_name = "gpt2-tiny";
    s.config_device = "auto";
    s.gpus_per_node = 8;
    s.config_threads = 2;
    s = resolve(s);
    EXPECT_EQ(s.name, "gpt2-tiny");
    EXPECT_EQ(s.nproc_per_node, 8);
    EXPECT_EQ(s.cpu, "16");
    EXPECT_EQ(s.memory, "32Gi");
}

TEST(K8sRender, IndexedJobShape) {
    JobSpec s = cpu_spec(Kind::IndexedJob, 3);
    auto objs = render_objects(s);
    ASSERT_EQ(objs.size(), 3u);
    EXPECT_EQ(objs[0]["kind"], "ConfigMap");
    EXPECT_EQ(objs[0]["data"]["config.yaml"], s.config_yaml);
    EXPECT_EQ(objs[1]["kind"], "Service");
    EXPECT_EQ(objs[1]["spec"]["clusterIP"], "None");
    const Json& job = objs[2];
    EXPECT_EQ(job["spec"]["completionMode"], "Indexed");
    EXPECT_EQ(job["spec"]["completions"], 3);
    EXPECT_EQ(job["spec"]["parallelism"], 3);
    const Json& pod = job["spec"]["template"]["spec"];
    EXPECT_EQ(pod["subdomain"], objs[1]["metadata"]["name"]);
    EXPECT_EQ(pod["restartPolicy"], "Never");
    const auto args = pod["containers"][0]["args"].get<std::vector<std::string>>();
    const std::vector<std::string> want = {"launch", "--nnodes", "3", "--node-rank", "$(JOB_COMPLETION_INDEX)",
                                           "--nproc-per-node", "1", "--master-addr", "tiny-0.tiny", "--master-port",
                                           "29500", "--max-restarts", "0", "--", "train", "--config",
                                           "/etc/llmtrain/config.yaml", "--resume", "auto", "--set",
                                           "output.run_id=tiny", "--set", "output.root_dir=/out"};
    EXPECT_EQ(args, want);
    const Json& rules = job["spec"]["podFailurePolicy"]["rules"];
    EXPECT_EQ(rules[0]["action"], "FailJob");
    EXPECT_EQ(rules[0]["onExitCodes"]["values"][0], 2);
    EXPECT_EQ(rules[1]["onPodConditions"][0]["type"], "DisruptionTarget");
}

TEST(K8sRender, GpuPodsGetShmTolerationAndGpuLimits) {
    JobSpec s;
    s.name = "g";
    s.nodes = 2;
    s.gpus_per_node = 4;
    s.config_device = "cuda";
    s = resolve(s);
    Json pod = render_objects(s)[2]["spec"]["template"]["spec"];
    EXPECT_EQ(pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], "4");
    EXPECT_EQ(pod["tolerations"][0]["key"], "nvidia.com/gpu");
    bool shm = false;
    for (const auto& m : pod["containers"][0]["volumeMounts"]) shm |= m["mountPath"] == "/dev/shm";
    EXPECT_TRUE(shm);
}

// Object storage: --s3-secret puts the AWS_* variables in every kind's pods through secretKeyRef, the key pair
// required and the rest optional; no value of them is in the manifest's text.
TEST(K8sRender, S3SecretIsPassedThroughValueFrom) {
    for (Kind kind : {Kind::IndexedJob, Kind::JobSet, Kind::StatefulSet, Kind::TrainJob, Kind::PyTorchJob}) {
        JobSpec s = cpu_spec(kind, 2);
        s.s3_secret = "team-s3";
        s = resolve(s);
        const std::string text = render(s);
        std::map<std::string, Json> refs;
        for (const auto& obj : render_objects(s)) {
            std::function<void(const Json&)> walk = [&](const Json& j) {
                if (j.is_object() && j.contains("name") && j.contains("valueFrom") &&
                    j["valueFrom"].contains("secretKeyRef") && j["name"].get<std::string>().rfind("AWS_", 0) == 0)
                    refs[j["name"]] = j["valueFrom"]["secretKeyRef"];
                if (j.is_object() || j.is_array())
                    for (const auto& v : j) walk(v);
            };
            walk(obj);
        }
        SCOPED_TRACE(text);
        ASSERT_EQ(refs.size(), 5u);
        for (const auto& [name, ref] : refs) {
            EXPECT_EQ(ref["name"], "team-s3");
            EXPECT_EQ(ref["key"], name);
            const bool required = name == "AWS_ACCESS_KEY_ID" || name == "AWS_SECRET_ACCESS_KEY";
            EXPECT_EQ(ref.value("optional", false), !required) << name;
        }
    }
}

TEST(K8sSpec, WarningsKnowAboutOutputSync) {
    JobSpec s = cpu_spec(Kind::IndexedJob, 1);
    s.output_pvc = "";
    auto has = [](const std::vector<std::string>& w, const std::string& x) {
        return std::any_of(w.begin(), w.end(), [&](const std::string& l) { return l.find(x) != std::string::npos; });
    };
    EXPECT_TRUE(has(warnings(s), "no --output-pvc"));
    s.config_sync = "s3://team/runs";
    EXPECT_FALSE(has(warnings(s), "no --output-pvc"));  // the checkpoints outlive the pod in the store
    EXPECT_TRUE(has(warnings(s), "no --s3-secret"));
    s.s3_secret = "team-s3";
    EXPECT_FALSE(has(warnings(s), "no --s3-secret"));
}

// data.source idx's default files come with the image (deploy/Containerfile installs dataset-fashion-mnist):
// no warning that they lie outside the /data volume; another absolute path outside it still warns.
TEST(K8sSpec, ImageDatasetsNeedNoDataVolume) {
    JobSpec s = cpu_spec(Kind::IndexedJob, 1);
    s.data_pvc = "datasets";
    s.config_data_paths = {{"data.train_images", "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"}};
    auto has = [](const std::vector<std::string>& w, const std::string& x) {
        return std::any_of(w.begin(), w.end(), [&](const std::string& l) { return l.find(x) != std::string::npos; });
    };
    EXPECT_FALSE(has(warnings(s), "outside the /data volume"));
    s.config_data_paths.push_back({"data.test_images", "/home/me/t10k-images-idx3-ubyte.gz"});
    EXPECT_TRUE(has(warnings(s), "outside the /data volume"));
}

// A path under /data with no --data-pvc: nothing is mounted there, so the pods would fail to open it.
TEST(K8sSpec, DataPathsWithoutADataVolumeWarn) {
    JobSpec s = cpu_spec(Kind::IndexedJob, 1);
    s.config_data_paths = {{"data.train_images", "/data/mnist/train-images-idx3-ubyte.gz"}};
    auto has = [](const std::vector<std::string>& w, const std::string& x) {
        return std::any_of(w.begin(), w.end(), [&](const std::string& l) { return l.find(x) != std::string::npos; });
    };
    EXPECT_TRUE(has(warnings(s), "data.train_images is /data/mnist/train-images-idx3-ubyte.gz, under /data, but no "
                                 "--data-pvc"));
    s.data_pvc = "datasets";
    EXPECT_FALSE(has(warnings(s), "no --data-pvc"));
    s.data_pvc = "";
    s.config_data_paths = {{"data.train_images", "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"}};
    EXPECT_FALSE(has(warnings(s), "no --data-pvc"));  // the image's copy
}

TEST(K8sRender, EachKindsRankSource) {
    auto args_of = [](Kind k) { return launcher_args(cpu_spec(k, 2)); };
    auto has = [](const std::vector<std::string>& a, const std::string& x) {
        return std::find(a.begin(), a.end(), x) != a.end();
    };
    EXPECT_TRUE(has(args_of(Kind::JobSet), "tiny-node-0-0.tiny"));
    EXPECT_FALSE(has(args_of(Kind::StatefulSet), "--node-rank"));  // LLMTRAIN_POD_INDEX / host name
    EXPECT_FALSE(has(args_of(Kind::TrainJob), "--nnodes"));        // PET_*
    EXPECT_FALSE(has(args_of(Kind::PyTorchJob), "--nnodes"));
    auto pj = render_objects(cpu_spec(Kind::PyTorchJob, 3))[1];
    EXPECT_EQ(pj["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"], 2);
    EXPECT_EQ(pj["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["name"], "pytorch");
    auto one = render_objects(cpu_spec(Kind::PyTorchJob, 1))[1];
    EXPECT_FALSE(one["spec"]["pytorchReplicaSpecs"].contains("Worker"));
}

TEST(K8sRender, TorchrunLauncherKeepsTorchrunInTheCommand) {
    JobSpec s = cpu_spec(Kind::PyTorchJob, 2);
    s.launcher = "torchrun";
    s.nproc_per_node = 2;
    s = resolve(s);
    auto c = render_objects(s)[1]["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0];
    EXPECT_EQ(c["command"], Json::array({"torchrun"}));
    EXPECT_EQ(c["args"], Json::array({"--nproc-per-node", "2", "--max-restarts", "0", "--no-python", "llmtrain",
                                      "train", "--config", "/etc/llmtrain/config.yaml", "--resume", "auto", "--set",
                                      "output.run_id=tiny", "--set", "output.root_dir=/out"}));
    s = cpu_spec(Kind::TrainJob, 2);
    s.launcher = "torchrun";
    s = resolve(s);
    auto t = render_objects(s)[1]["spec"]["trainer"];
    EXPECT_EQ(t["command"], Json::array({"torchrun"}));
    EXPECT_EQ(t["args"][0], "--max-restarts");  // nodes, rank, master and processes from PET_*
}

TEST(K8sSpec, TorchrunLauncherOnlyWhereAnOperatorSetsPet) {
    for (Kind k : {Kind::IndexedJob, Kind::JobSet, Kind::StatefulSet}) {
        JobSpec s = cpu_spec(k, 2);
        s.launcher = "torchrun";
        expect_refused(s, "--launcher torchrun: only --kind pytorchjob and trainjob run torchrun");
    }
    JobSpec s = cpu_spec(Kind::PyTorchJob, 1);
    s.launcher = "mpirun";
    expect_refused(s, "--launcher 'mpirun': expected llmtrain or torchrun");
}

TEST(K8sOps, PodRankPerKind) {
    Json indexed = {
        {"metadata", {{"name", "tiny-1-abcde"}, {"annotations", {{"batch.kubernetes.io/job-completion-index", "1"}}}}},
        {"status", {{"phase", "Running"}, {"containerStatuses", {{{"restartCount", 2}}}}}}};
    PodStatus p = pod_status(Kind::IndexedJob, indexed);
    EXPECT_EQ(p.rank, 1);
    EXPECT_EQ(p.restarts, 2);
    EXPECT_EQ(p.phase, "Running");
    Json worker = {{"metadata", {{"name", "tiny-worker-0"},
                                 {"labels", {{"training.kubeflow.org/replica-type", "worker"},
                                             {"training.kubeflow.org/replica-index", "0"}}}}}};
    EXPECT_EQ(pod_status(Kind::PyTorchJob, worker).rank, 1);
    Json sts = {{"metadata", {{"name", "tiny-3"}}}};  // no pod-index label (Kubernetes < 1.28)
    EXPECT_EQ(pod_status(Kind::StatefulSet, sts).rank, 3);
    Json done = {
        {"metadata", {{"name", "tiny-0-x"}, {"labels", {{"batch.kubernetes.io/job-completion-index", "0"}}}}},
        {"status", {{"containerStatuses", {{{"state", {{"terminated", {{"reason", "Error"}, {"exitCode", 2}}}}}}}}}}};
    PodStatus d = pod_status(Kind::IndexedJob, done);
    EXPECT_EQ(d.rank, 0);
    EXPECT_EQ(d.reason, "Error");
    ASSERT_TRUE(d.exit_code.has_value());
    EXPECT_EQ(*d.exit_code, 2);
}

TEST(K8sOps, LatestPodPerRank) {
    std::vector<PodStatus> pods(3);
    pods[0].rank = 0, pods[0].name = "old", pods[0].created = "2026-11-26T06:00:00Z";
    pods[1].rank = 0, pods[1].name = "new", pods[1].created = "2026-11-26T06:05:00Z";
    pods[2].rank = 1, pods[2].name = "one", pods[2].created = "2026-11-26T06:00:00Z";
    auto l = latest_per_rank(pods);
    ASSERT_EQ(l.size(), 2u);
    EXPECT_EQ(l[0].name, "new");
    EXPECT_EQ(l[1].name, "one");
}

}  // namespace
}  // namespace llmt::k8s
