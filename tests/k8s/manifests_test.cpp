// Example renders (deploy/examples/<scenario>/manifests.yaml, listed in deploy/examples/scenarios.txt)
// are re-rendered through the real binary and diffed, then every render is validated against the
// upstream schemas and the semantic checks of validate_manifests.mjs (node + kubernetes-models +
// ajv, installed by scripts/setup.d/40-k8s-validators.sh). Also: invalid options exit 2 with a
// message that names the problem.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "support/subprocess.h"

namespace fs = std::filesystem;
using llmt::testing::llmtrain_bin;
using llmt::testing::run_process;

namespace {

const fs::path kSrc = LLMT_SOURCE_DIR;
const fs::path kExamples = kSrc / "deploy/examples";

struct Scenario {
    std::string name;
    std::vector<std::string> args;
    int nodes = 1, nproc = 0, gpus = 0;
};

std::vector<Scenario> scenarios() {
    std::ifstream in(kExamples / "scenarios.txt");
    std::vector<Scenario> out;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream ss(line);
        Scenario s;
        ss >> s.name;
        for (std::string w; ss >> w;) s.args.push_back(w);
        for (std::size_t i = 0; i + 1 < s.args.size(); ++i) {
            if (s.args[i] == "--nodes") s.nodes = std::stoi(s.args[i + 1]);
            if (s.args[i] == "--nproc-per-node") s.nproc = std::stoi(s.args[i + 1]);
            if (s.args[i] == "--gpus-per-node") s.gpus = std::stoi(s.args[i + 1]);
        }
        if (s.nproc == 0) s.nproc = s.gpus > 0 ? s.gpus : 1;
        out.push_back(s);
    }
    return out;
}

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string render(const Scenario& s) {
    std::vector<std::string> argv = {llmtrain_bin(), "k8s", "render", "--config",
                                     (kExamples / "config.yaml").string()};
    argv.insert(argv.end(), s.args.begin(), s.args.end());
    auto r = run_process(argv);
    EXPECT_EQ(r.exit_code, 0) << s.name << ": " << r.err;
    return r.out;
}

// First differing line, for a readable failure.
std::string first_diff(const std::string& a, const std::string& b) {
    std::istringstream x(a), y(b);
    std::string l1, l2;
    for (int n = 1;; ++n) {
        bool g1 = static_cast<bool>(std::getline(x, l1)), g2 = static_cast<bool>(std::getline(y, l2));
        if (!g1 && !g2) return "identical";
        if (!g1 || !g2 || l1 != l2)
            return "line " + std::to_string(n) + ":\n  committed: " + (g1 ? l1 : "<eof>") +
                   "\n  rendered:  " + (g2 ? l2 : "<eof>");
    }
}

fs::path validator_modules() { return kSrc / ".cache/k8s-validate/node_modules"; }

llmt::testing::ProcResult validate(const std::vector<std::string>& file_args) {
    std::vector<std::string> argv = {"node", (kSrc / "tests/k8s/validate_manifests.mjs").string(),
                                     (kSrc / "tests/k8s/schemas").string()};
    argv.insert(argv.end(), file_args.begin(), file_args.end());
    return run_process(argv, "", 120, {"K8S_VALIDATE_MODULES=" + validator_modules().string()});
}

fs::path temp_dir(const std::string& tag) {
    fs::path d = fs::temp_directory_path() / ("llmt_k8s_" + tag + "_" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
}

TEST(K8sManifests, ExamplesMatchTheRenderer) {
    auto list = scenarios();
    ASSERT_GE(list.size(), 17u) << "every kind x {1x1, 2x1, 4x8gpu}, and torchrun in a PyTorchJob and a TrainJob";
    for (const auto& s : list) {
        fs::path committed = kExamples / s.name / "manifests.yaml";
        ASSERT_TRUE(fs::exists(committed)) << committed << " missing: run scripts/render_k8s_examples.sh";
        std::string want = slurp(committed), got = render(s);
        EXPECT_EQ(want, got) << s.name << " differs from the committed example at " << first_diff(want, got)
                             << "\nIf the change is intended, run scripts/render_k8s_examples.sh " << llmtrain_bin();
    }
}

TEST(K8sManifests, EveryKindAndShapeValidates) {
    ASSERT_TRUE(fs::exists(validator_modules() / "kubernetes-models"))
        << validator_modules() << " is missing: run scripts/setup.d/40-k8s-validators.sh (scripts/setup.sh runs it)";
    fs::path dir = temp_dir("validate");
    std::vector<std::string> files;
    for (const auto& s : scenarios()) {
        fs::path f = dir / (s.name + ".yaml");
        std::ofstream(f) << render(s);
        files.insert(files.end(),
                     {f.string(), std::to_string(s.nodes), std::to_string(s.nproc), std::to_string(s.gpus)});
    }
    auto r = validate(files);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("validated 17 file(s): 0 problem(s)"), std::string::npos) << r.out << r.err;
    fs::remove_all(dir);
}

// The validator must catch what it claims to: break a render in ways the schemas alone accept.
TEST(K8sManifests, ValidatorCatchesBrokenManifests) {
    ASSERT_TRUE(fs::exists(validator_modules() / "kubernetes-models")) << "run scripts/setup.d/40-k8s-validators.sh";
    fs::path dir = temp_dir("broken");
    auto list = scenarios();
    auto find = [&](const std::string& n) {
        for (const auto& s : list)
            if (s.name == n) return s;
        throw std::runtime_error("no scenario " + n);
    };
    auto replace = [](std::string s, const std::string& from, const std::string& to) {
        auto at = s.find(from);
        EXPECT_NE(at, std::string::npos) << from;
        if (at != std::string::npos) s.replace(at, from.size(), to);
        return s;
    };
    std::string job = render(find("indexed-job-2x1"));
    job = replace(job, "restartPolicy: Never", "restartPolicy: Always");
    job = replace(job, "parallelism: 2", "parallelism: 3");
    job = replace(job, "subdomain: tiny", "subdomain: tinny");
    std::ofstream(dir / "job.yaml") << job;
    std::string pj = render(find("pytorchjob-2x1"));
    pj = replace(pj, "name: pytorchjob-port", "name: port");
    pj = replace(pj, "nprocPerNode: \"1\"", "nprocPerNode: \"1\"\n  elasticPolicyy: {}");
    std::ofstream(dir / "pj.yaml") << pj;
    // torchrun kept in the command, but without `--no-python llmtrain` and restarting in place
    std::string tr = render(find("pytorchjob-torchrun-2x1"));
    tr = replace(tr, "- --no-python\n                - llmtrain", "- llmtrain");
    tr = replace(tr, "- --max-restarts\n                - \"0\"", "- --max-restarts\n                - \"3\"");
    std::ofstream(dir / "tr.yaml") << tr;
    auto r = validate({(dir / "job.yaml").string(), "2", "1", "0", (dir / "pj.yaml").string(), "2", "1", "0",
                       (dir / "tr.yaml").string(), "2", "1", "0"});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    for (const char* want :
         {"Job restartPolicy Always", "parallelism 3 != nodes 2", "pod subdomain tinny is not a Service",
          "no container pytorch with port pytorchjob-port", ".spec.elasticPolicyy is not a field",
          "no `--no-python llmtrain train` after the torchrun flags", "torchrun restarts in place"})
        EXPECT_NE(r.out.find(want), std::string::npos) << "validator did not report: " << want << "\n" << r.out;
    fs::remove_all(dir);
}

TEST(K8sManifests, InvalidOptionsExit2WithAClearMessage) {
    const std::string cfg = (kExamples / "config.yaml").string();
    struct Case {
        std::vector<std::string> args;
        std::string want;
    };
    const std::vector<Case> cases = {
        {{"--nodes", "0"}, "need at least 1 node"},
        {{"--nodes", "2", "--gpus-per-node", "8"}, "run.device is cpu"},
        {{"--nodes", "2", "--name", "My_Job"}, "not a DNS-1035 label"},
        {{"--nodes", "2", "--kind", "deployment"}, "expected one of indexed-job"},
        {{"--nodes", "2", "--gpus-per-node", "8", "--nproc-per-node", "2", "--set", "run.device=cuda"},
         "must be equal"},
        {{"--nodes", "2", "--env", "NOEQUALS"}, "expected KEY=VALUE"},
        {{"--nodes", "2", "--set", "trainer.lr=abc"}, "trainer.lr"},
    };
    for (const auto& c : cases) {
        std::vector<std::string> argv = {llmtrain_bin(), "k8s", "render", "--config", cfg};
        argv.insert(argv.end(), c.args.begin(), c.args.end());
        auto r = run_process(argv);
        EXPECT_EQ(r.exit_code, 2) << c.want << "\n" << r.err;
        EXPECT_NE(r.err.find(c.want), std::string::npos) << r.err;
        EXPECT_TRUE(r.out.empty()) << "nothing on stdout when refused: " << r.out;
    }
}

// A command job (`k8s render ... -- python3 train.py`, server/jobs/command_job.h): every kind renders the program
// under `llmtrain launch --no-python`, without a ConfigMap, with its metrics and outputs under /out/<name>,
// and passes the same schemas and semantic checks.
TEST(K8sManifests, CommandJobsRenderForEveryKindAndValidate) {
    ASSERT_TRUE(fs::exists(validator_modules() / "kubernetes-models")) << "run scripts/setup.d/40-k8s-validators.sh";
    fs::path dir = temp_dir("command");
    std::vector<std::string> files;
    for (const char* kind : {"indexed-job", "jobset", "trainjob", "pytorchjob", "statefulset"}) {
        auto r = run_process({llmtrain_bin(),
                              "k8s",
                              "render",
                              "--kind",
                              kind,
                              "--name",
                              "mnist-ddp",
                              "--nodes",
                              "2",
                              "--nproc-per-node",
                              "2",
                              "--image",
                              "registry.example.com/team/mnist:1.0",
                              "--output-pvc",
                              "outputs",
                              "--",
                              "python3",
                              "train.py",
                              "--epochs",
                              "3"});
        ASSERT_EQ(r.exit_code, 0) << kind << ": " << r.err;
        EXPECT_EQ(r.out.find("kind: ConfigMap"), std::string::npos) << kind;
        EXPECT_NE(r.out.find("- --no-python\n"), std::string::npos) << r.out;
        EXPECT_NE(r.out.find("value: /out/mnist-ddp/metrics.jsonl"), std::string::npos) << r.out;
        // Not a field of a TrainJob's runtime patch: there the runtime decides.
        if (std::string(kind) != "trainjob") {
            EXPECT_NE(r.out.find("automountServiceAccountToken: false"), std::string::npos) << r.out;
        }
        fs::path f = dir / (std::string(kind) + ".yaml");
        std::ofstream(f) << r.out;
        files.insert(files.end(), {f.string(), "2", "2", "0"});
    }
    auto v = validate(files);
    EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
    EXPECT_NE(v.out.find("validated 5 file(s): 0 problem(s)"), std::string::npos) << v.out << v.err;
    // A config and a command at once, or neither, is refused with exit 2.
    auto both = run_process({llmtrain_bin(), "k8s", "render", "--config", (kExamples / "config.yaml").string(),
                             "--nodes", "1", "--", "python3", "train.py"});
    EXPECT_EQ(both.exit_code, 2) << both.err;
    EXPECT_NE(both.err.find("not both"), std::string::npos) << both.err;
    auto neither = run_process({llmtrain_bin(), "k8s", "render", "--nodes", "1", "--name", "x"});
    EXPECT_EQ(neither.exit_code, 2) << neither.err;
    EXPECT_NE(neither.err.find("--config is required"), std::string::npos) << neither.err;
    fs::remove_all(dir);
}

TEST(K8sManifests, WarnsAboutLostCheckpointsAndRelativeDataPaths) {
    auto r = run_process({llmtrain_bin(), "k8s", "render", "--config",
                          (kSrc / "configs/presets/gpt2_tiny_cpu.yaml").string(), "--nodes", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("no --output-pvc"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("data.train_shards is relative"), std::string::npos) << r.err;
    EXPECT_NE(r.out.find("name: gpt2-tiny"), std::string::npos) << "the name defaults to run.name";
}

// A classifier preset on Kubernetes. fashion_mnist_cnn reads data.source idx's default files,
// Debian's dataset-fashion-mnist, which the image installs (deploy/Containerfile): the pods find them
// without a volume. Pointed at IDX files of a data volume (/data/...), the render mounts the claim
// read-only at /data and the config the pods read names those files; without --data-pvc it warns.
namespace {

struct Rendered {
    YAML::Node pod;          // the Indexed Job's pod spec
    std::string config;      // the ConfigMap's config.yaml
    std::string warnings;    // stderr
};

Rendered render_classifier(const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {llmtrain_bin(), "k8s", "render", "--config",
                                     (kSrc / "configs/presets/fashion_mnist_cnn.yaml").string(),
                                     "--name", "fmnist", "--nodes", "1", "--output-pvc", "outputs"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto r = run_process(argv);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    Rendered out;
    out.warnings = r.err;
    for (const YAML::Node& doc : YAML::LoadAll(r.out)) {
        const std::string kind = doc["kind"].as<std::string>();
        if (kind == "ConfigMap") out.config = doc["data"]["config.yaml"].as<std::string>();
        if (kind == "Job") out.pod = doc["spec"]["template"]["spec"];
    }
    return out;
}

// The claim behind the volume mounted at `mount_path` ("" when none is mounted there).
std::string claim_at(const YAML::Node& pod, const std::string& mount_path, bool* read_only = nullptr) {
    for (const YAML::Node& m : pod["containers"][0]["volumeMounts"]) {
        if (m["mountPath"].as<std::string>() != mount_path) continue;
        if (read_only) *read_only = m["readOnly"] && m["readOnly"].as<bool>();
        for (const YAML::Node& v : pod["volumes"])
            if (v["name"].as<std::string>() == m["name"].as<std::string>() && v["persistentVolumeClaim"])
                return v["persistentVolumeClaim"]["claimName"].as<std::string>();
    }
    return "";
}

}  // namespace

TEST(K8sManifests, ClassifierPresetReadsTheImagesDatasetOrAMountedOne) {
    // The default: the config leaves data.train_images etc. at their defaults, which resolve to the image's
    // copy; nothing is mounted at /data and nothing warns about the data.
    Rendered d = render_classifier({});
    ASSERT_TRUE(d.pod) << "no Job in the render";
    EXPECT_EQ(d.config.find("train_images"), std::string::npos) << d.config;  // the default, resolved in the pod
    EXPECT_NE(d.config.find("source: idx"), std::string::npos) << d.config;
    EXPECT_EQ(claim_at(d.pod, "/data"), "");
    EXPECT_EQ(d.warnings.find("data."), std::string::npos) << d.warnings;
    auto resolved = run_process({llmtrain_bin(), "print-config", "--config",
                                 (kSrc / "configs/presets/fashion_mnist_cnn.yaml").string(), "--json"});
    ASSERT_EQ(resolved.exit_code, 0) << resolved.err;
    const std::string want = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";
    EXPECT_NE(resolved.out.find(want), std::string::npos) << resolved.out;
    // ... which the image installs.
    const std::string containerfile = slurp(kSrc / "deploy/Containerfile");
    const auto runtime = containerfile.find("ARG RUNTIME_PACKAGES=");
    ASSERT_NE(runtime, std::string::npos);
    EXPECT_NE(containerfile.substr(runtime, containerfile.find('\n', runtime) - runtime).find("dataset-fashion-mnist"),
              std::string::npos);

    // Digit MNIST on a data volume: mounted read-only at /data from the claim, and the config names it.
    const std::vector<std::string> mnist = {
        "--set", "data.train_images=/data/mnist/train-images-idx3-ubyte.gz",
        "--set", "data.train_labels=/data/mnist/train-labels-idx1-ubyte.gz",
        "--set", "data.test_images=/data/mnist/t10k-images-idx3-ubyte.gz",
        "--set", "data.test_labels=/data/mnist/t10k-labels-idx1-ubyte.gz"};
    std::vector<std::string> with_pvc = mnist;
    with_pvc.insert(with_pvc.end(), {"--data-pvc", "datasets"});
    Rendered m = render_classifier(with_pvc);
    bool read_only = false;
    EXPECT_EQ(claim_at(m.pod, "/data", &read_only), "datasets");
    EXPECT_TRUE(read_only);
    EXPECT_NE(m.config.find("/data/mnist/train-images-idx3-ubyte.gz"), std::string::npos) << m.config;
    EXPECT_EQ(m.warnings.find("data."), std::string::npos) << m.warnings;
    // The same paths without the claim: the pods would not find them, and the render says so.
    Rendered none = render_classifier(mnist);
    EXPECT_EQ(claim_at(none.pod, "/data"), "");
    EXPECT_NE(none.warnings.find("data.train_images is /data/mnist/train-images-idx3-ubyte.gz, under /data, but no "
                                 "--data-pvc"),
              std::string::npos)
        << none.warnings;
}

}  // namespace
