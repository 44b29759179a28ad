// The two-pod Indexed Job that `llmtrain k8s render` prints, run without a cluster as Kubernetes would
// run it (tests/k8s/job_harness.h): each pod in its own network namespace with the pod's hostname and
// the headless Service's DNS names, command/args/env from the manifest, the volumes at their mountPaths,
// and the Job's failure policy applied. (a) both pods complete and rank 0's summary shows the configured
// final step; (b) one pod is killed -9 mid-run and recreated (same index, same output volume): the job
// resumes from the last checkpoint and ends at the same final step. Also: the harness refuses fields it
// does not implement, and fills $(VAR) and downward-API values as Kubernetes does.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "core/fs.h"
#include "job_harness.h"
#include "support/subprocess.h"
#include "support/train_fixture.h"

namespace {

namespace fs = std::filesystem;
namespace kjob = llmt::testing::kjob;
using llmt::testing::llmtrain_bin;
using llmt::testing::run_process;

const fs::path kSrc = LLMT_SOURCE_DIR;
constexpr int kSteps = 40;      // trainer.max_steps of the rendered job
constexpr int kSaveEvery = 5;   // trainer.save_every_steps
// The Job controller's pod-recreation delay after a first failure: Kubernetes' own 10 s (doubling).
constexpr double kBackoffS = 10;

#define EXPECT_HAS(hay, needle) EXPECT_NE((hay).find(needle), std::string::npos) << "looked for: " << (needle) << "\nin:\n" << (hay)

// The tiny CPU preset, shortened (a 2-layer d_model 32 model, 40 steps, a checkpoint every 5), reading
// its shards from the /data volume; everything else as a user would render it.
std::vector<std::string> render_args(const std::string& name) {
    return {llmtrain_bin(), "k8s", "render", "--config", (kSrc / "configs/presets/gpt2_tiny_cpu.yaml").string(),
            "--nodes", "2", "--name", name, "--image", "llmtrain:test", "--data-pvc", "datasets", "--output-pvc",
            "outputs", "--hf-token-secret", "hf-token",
            "--set", "run.threads=1", "--set", "model.n_layer=2", "--set", "model.n_head=2", "--set", "model.d_model=32",
            "--set", "model.block_size=32", "--set", "trainer.max_steps=" + std::to_string(kSteps),
            "--set", "trainer.micro_batch_size=4", "--set", "trainer.warmup_steps=2", "--set", "trainer.log_every_steps=1",
            "--set", "trainer.eval_every_steps=20", "--set", "trainer.eval_steps=2",
            "--set", "trainer.save_every_steps=" + std::to_string(kSaveEvery), "--set", "trainer.keep_last=2",
            "--set", "dist.timeout_sec=30", "--set", "data.train_shards=/data/shards/train_*.bin",
            "--set", "data.val_shards=/data/shards/val_*.bin"};
}

void chmod_tree(const fs::path& root, mode_t dirs, mode_t files) {
    ::chmod(root.c_str(), dirs);
    for (const auto& e : fs::recursive_directory_iterator(root))
        ::chmod(e.path().c_str(), e.is_directory() ? dirs : files);
}

class PodsInNetns : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        root_ = fs::temp_directory_path() / ("llmt_k8s_pods_" + std::to_string(::getpid()));
        fs::create_directories(root_ / "datasets");
        auto r = llmt::testing::prepare_synthetic_shards(root_ / "datasets");
        ASSERT_EQ(r.exit_code, 0) << r.err;
        // The pods run as uid 10001 and the data claim is mounted read-only (no fsGroup change there).
        chmod_tree(root_, 0755, 0644);
    }
    static void TearDownTestSuite() { fs::remove_all(root_); }

    // Renders the job, parses it, and gives the cluster inputs: claims as directories, the secret, the
    // image's ENV (PATH with the llmtrain under test first; OPENBLAS_CORETYPE as the environment sets it).
    kjob::JobRunner make_runner(const std::string& name, const fs::path& outputs, std::string& yaml_out) {
        auto r = run_process(render_args(name));
        if (r.exit_code != 0) throw std::runtime_error("render failed: " + r.err);
        llmt::write_file_atomic(root_ / (name + ".yaml"), r.out);
        yaml_out = r.out;
        kjob::ClusterInputs in;
        fs::create_directories(outputs);
        in.claims = {{"datasets", root_ / "datasets"}, {"outputs", outputs}};
        in.secrets["hf-token"]["HF_TOKEN"] = "hf_test_token";
        in.image_env = {{"PATH", fs::path(llmtrain_bin()).parent_path().string() +
                                     ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}};
        if (const char* c = std::getenv("OPENBLAS_CORETYPE")) in.image_env.emplace_back("OPENBLAS_CORETYPE", c);
        return kjob::JobRunner(kjob::parse_manifests(r.out), in, root_ / ("work-" + name), kBackoffS);
    }
    static nlohmann::json summary(const fs::path& run_dir) {
        return nlohmann::json::parse(llmt::read_file(run_dir / "summary.json"));
    }
    static fs::path root_;
};
fs::path PodsInNetns::root_;

std::string pod_lines(const kjob::JobRunner& job) {
    std::string s;
    for (const auto& p : job.pods())
        s += p.name + " index " + std::to_string(p.index) + " ip " + p.ip + " exit " + std::to_string(p.exit_code) +
             " action " + (p.exit_code == 0 ? "-" : kjob::to_string(p.action)) + "\n";
    return s;
}
std::string pod_report(const kjob::JobRunner& job) { return pod_lines(job) + job.logs(); }

TEST_F(PodsInNetns, TwoPodsRunToCompletion) {
    std::string yaml;
    const fs::path outputs = root_ / "outputs-a";
    auto job = make_runner("tiny", outputs, yaml);
    std::string skip;
    if (!job.start(&skip)) GTEST_SKIP() << skip;
    const auto t0 = std::chrono::steady_clock::now();
    auto outcome = job.wait(150);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_EQ(outcome.condition, "Complete") << outcome.reason << "\n" << pod_report(job);
    ASSERT_EQ(job.pods().size(), 2u) << pod_report(job);
    for (const auto& p : job.pods()) EXPECT_EQ(p.exit_code, 0) << p.name;
    // The run directory /out/tiny of the rendered output.run_id and root_dir, on the claim.
    auto s = summary(outputs / "tiny");
    EXPECT_EQ(s["steps"], kSteps);
    EXPECT_EQ(s["world_size"], 2);
    EXPECT_TRUE(fs::exists(outputs / "tiny/logs/rank0.log"));
    EXPECT_TRUE(fs::exists(outputs / "tiny/logs/rank1.log"));
    EXPECT_TRUE(fs::exists(outputs / "tiny/checkpoints/step_40/state.json"));
    // Written by the pods' user (runAsUser 10001), group fsGroup.
    struct stat st {};
    ASSERT_EQ(::stat((outputs / "tiny/summary.json").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 10001u);
    const std::string logs = job.logs();
    // Node rank from $(JOB_COMPLETION_INDEX), rank 0 found as tiny-0.tiny.
    EXPECT_HAS(logs, "node_rank=1 (--node-rank)");
    EXPECT_HAS(logs, "tiny-0.tiny");
    std::cout << "two pods, " << kSteps << " steps: " << took << " s\n";
}

TEST_F(PodsInNetns, KilledPodIsRecreatedAndTheJobResumesFromTheCheckpoint) {
    std::string yaml;
    const fs::path outputs = root_ / "outputs-b";
    auto job = make_runner("tiny", outputs, yaml);
    std::string skip;
    if (!job.start(&skip)) GTEST_SKIP() << skip;
    const auto t0 = std::chrono::steady_clock::now();
    // Kill pod 1 once the first checkpoint is complete (mid-run: 35 steps are still to go, so even an idle
    // machine is far from the end when the kill lands).
    const fs::path ck = outputs / ("tiny/checkpoints/step_" + std::to_string(kSaveEvery)) / "state.json";
    bool reached = false;
    for (int i = 0; i < 1200 && !job.step(); ++i) {
        if (fs::exists(ck)) {
            reached = true;
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ASSERT_TRUE(reached) << "no checkpoint at step " << kSaveEvery << " within 120 s\n" << pod_report(job);
    ASSERT_FALSE(fs::exists(outputs / "tiny/summary.json")) << "the run finished before the kill";
    ASSERT_TRUE(job.kill_pod(1)) << "pod 1 is not running\n" << pod_report(job);
    auto outcome = job.wait(170);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string report = pod_report(job);
    ASSERT_EQ(outcome.condition, "Complete") << outcome.reason << "\n" << report;

    // The killed pod: SIGKILL is exit code 137, which the podFailurePolicy counts (not 2: no FailJob);
    // index 1 was recreated as a new pod (new name, new IP).
    const auto& pods = job.pods();
    ASSERT_GE(pods.size(), 3u) << report;
    const auto killed = std::find_if(pods.begin(), pods.end(), [](const auto& p) { return p.index == 1; });
    EXPECT_EQ(killed->exit_code, 137) << report;
    EXPECT_EQ(killed->action, kjob::Action::Count) << report;
    std::set<std::string> names, ips;
    int index1 = 0;
    for (const auto& p : pods) {
        names.insert(p.name);
        if (p.index == 1) ++index1, ips.insert(p.ip);
    }
    EXPECT_EQ(names.size(), pods.size());
    EXPECT_GE(index1, 2) << report;
    EXPECT_EQ(ips.size(), static_cast<std::size_t>(index1)) << report;
    // Every index ended with a successful pod.
    for (int i = 0; i < 2; ++i) {
        auto last = std::find_if(pods.rbegin(), pods.rend(), [&](const auto& p) { return p.index == i; });
        EXPECT_EQ(last->exit_code, 0) << "index " << i << "\n" << report;
    }

    // Resumed from a checkpoint on the shared volume, and the same final step as run (a).
    const std::string logs = job.logs();
    EXPECT_HAS(logs, "resume: /out/tiny/checkpoints/step_");
    auto s = summary(outputs / "tiny");
    EXPECT_EQ(s["steps"], kSteps);
    EXPECT_EQ(s["world_size"], 2);
    // No step logged twice: metrics are truncated back to the checkpoint on resume.
    std::vector<double> steps;
    for (const auto& m : llmt::testing::read_metrics(outputs / "tiny/metrics.jsonl"))
        if (m.contains("loss")) steps.push_back(m["step"]);
    ASSERT_EQ(steps.size(), static_cast<std::size_t>(kSteps)) << logs;
    for (std::size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(steps[i], static_cast<double>(i + 1));
    std::cout << "kill and recreate, " << kSteps << " steps: " << took << " s, " << pods.size() << " pods\n"
              << pod_lines(job);
    if (auto r = logs.find("resume: /out"); r != std::string::npos) std::cout << logs.substr(r, 80) << "\n";
}

// ---- the harness itself (no namespaces) ----

const std::string kExample = (kSrc / "deploy/examples/indexed-job-2x1/manifests.yaml").string();

TEST(JobHarness, ReadsTheCommittedIndexedJob) {
    auto m = kjob::parse_manifests(llmt::read_file(kExample));
    EXPECT_EQ(m.job.name, "tiny");
    EXPECT_EQ(m.job.completions, 2);
    EXPECT_EQ(m.job.parallelism, 2);
    EXPECT_EQ(m.job.backoff_limit_per_index, 3);
    EXPECT_EQ(m.job.max_failed_indexes, 0);
    EXPECT_EQ(m.job.subdomain, "tiny");
    // exit 2 fails the job at once, 137 (killed) is retried, a disruption is ignored.
    EXPECT_EQ(kjob::on_pod_failure(m.job, "trainer", 2, {}), kjob::Action::FailJob);
    EXPECT_EQ(kjob::on_pod_failure(m.job, "trainer", 137, {}), kjob::Action::Count);
    EXPECT_EQ(kjob::on_pod_failure(m.job, "trainer", 1, {"DisruptionTarget"}), kjob::Action::Ignore);
}

TEST(JobHarness, FillsDownwardApiAndExpandsReferences) {
    auto m = kjob::parse_manifests(llmt::read_file(kExample));
    const fs::path scratch = fs::temp_directory_path() / ("llmt_kjob_" + std::to_string(::getpid()));
    kjob::ClusterInputs in;
    in.claims = {{"datasets", scratch / "d"}, {"outputs", scratch / "o"}};
    fs::create_directories(scratch / "d");
    fs::create_directories(scratch / "o");
    in.secrets["hf-token"]["HF_TOKEN"] = "secret";
    in.image_env = {{"PATH", "/bin"}};
    auto p = kjob::instantiate(m, {1, 0, "tiny-1-abcde", "uid", "10.214.0.3"}, in, scratch / "pod");
    EXPECT_EQ(p.hostname, "tiny-1");
    const std::vector<std::string> want = {"llmtrain", "launch", "--nnodes", "2", "--node-rank", "1"};
    ASSERT_GE(p.argv.size(), want.size());
    EXPECT_EQ(std::vector<std::string>(p.argv.begin(), p.argv.begin() + 6), want);
    auto env = [&](const std::string& k) {
        for (const auto& [n, v] : p.env)
            if (n == k) return v;
        return std::string("<unset>");
    };
    EXPECT_EQ(env("JOB_COMPLETION_INDEX"), "1");
    EXPECT_EQ(env("HOSTNAME"), "tiny-1");
    EXPECT_EQ(env("HF_TOKEN"), "secret");
    EXPECT_EQ(env("PATH"), "/bin");
    ASSERT_EQ(p.binds.size(), 3u);
    EXPECT_EQ(p.binds[0].dst, "/etc/llmtrain");
    EXPECT_TRUE(p.binds[0].read_only);
    EXPECT_TRUE(fs::exists(p.binds[0].src / "config.yaml"));
    EXPECT_EQ(p.binds[2].src, scratch / "o");
    EXPECT_FALSE(p.binds[2].read_only);
    // A secret Kubernetes could not find: the pod would not start, and neither does the harness's.
    in.secrets.clear();
    EXPECT_THROW(kjob::instantiate(m, {1, 0, "tiny-1-abcde", "uid", "10.214.0.3"}, in, scratch / "pod"), std::runtime_error);
    fs::remove_all(scratch);

    EXPECT_EQ(kjob::expand("--rank=$(JOB_COMPLETION_INDEX) $(NOPE) $$(X) $(", {{"JOB_COMPLETION_INDEX", "3"}}),
              "--rank=3 $(NOPE) $(X) $(");
}

TEST(JobHarness, RefusesWhatItDoesNotImplement) {
    const std::string yaml = llmt::read_file(kExample);
    auto with = [&](const std::string& anchor, const std::string& insert) {
        auto p = yaml.find(anchor);
        EXPECT_NE(p, std::string::npos) << anchor;
        return yaml.substr(0, p) + insert + yaml.substr(p);
    };
    auto refused = [](const std::string& y, const std::string& field) {
        try {
            kjob::parse_manifests(y);
            ADD_FAILURE() << "accepted a manifest with " << field;
        } catch (const std::runtime_error& e) {
            EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
        }
    };
    refused(with("      restartPolicy: Never", "      hostNetwork: true\n"), "spec.template.spec.hostNetwork");
    refused(with("          imagePullPolicy:", "          workingDir: /tmp\n"), "containers[0].workingDir");
    refused(with("  completionMode: Indexed", "  activeDeadlineSeconds: 60\n"), "spec.activeDeadlineSeconds");
    std::string other = yaml;
    other.replace(other.find("restartPolicy: Never"), 20, "restartPolicy: OnFailure");
    refused(other, "restartPolicy");
    other = yaml;
    other.replace(other.find("subdomain: tiny"), 15, "subdomain: nope");
    refused(other, "subdomain");
}

}  // namespace
