// The two Indexed Job scenarios of pods_netns_test and pods_image_test (pod_scenarios.h): the job is
// rendered by the llmtrain under test and run by the harness (job_harness.h) with the fixture's runtime.
#include "pod_scenarios.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "core/fs.h"
#include "support/subprocess.h"
#include "support/train_fixture.h"

namespace llmt::testing::kjob {

namespace fs = std::filesystem;

namespace {

const fs::path kSrc = LLMT_SOURCE_DIR;
constexpr int kSteps = 40;      // trainer.max_steps of the rendered job
constexpr int kSaveEvery = 5;   // trainer.save_every_steps
// The Job controller's pod-recreation delay after a first failure: Kubernetes' own 10 s (doubling).
constexpr double kBackoffS = 10;

#define EXPECT_HAS(hay, needle) \
    EXPECT_NE((hay).find(needle), std::string::npos) << "looked for: " << (needle) << "\nin:\n" << (hay)

// The tiny CPU preset, shortened (a 2-layer d_model 32 model, 40 steps, a checkpoint every 5), reading
// its shards from the /data volume; everything else as a user would render it.
std::vector<std::string> render_args(const std::string& name, const std::string& image) {
    return {llmtrain_bin(),
            "k8s",
            "render",
            "--config",
            (kSrc / "configs/presets/gpt2_tiny_cpu.yaml").string(),
            "--nodes",
            "2",
            "--name",
            name,
            "--image",
            image,
            "--data-pvc",
            "datasets",
            "--output-pvc",
            "outputs",
            "--hf-token-secret",
            "hf-token",
            "--set",
            "run.threads=1",
            "--set",
            "model.n_layer=2",
            "--set",
            "model.n_head=2",
            "--set",
            "model.d_model=32",
            "--set",
            "model.block_size=32",
            "--set",
            "trainer.max_steps=" + std::to_string(kSteps),
            "--set",
            "trainer.micro_batch_size=4",
            "--set",
            "trainer.warmup_steps=2",
            "--set",
            "trainer.log_every_steps=1",
            "--set",
            "trainer.eval_every_steps=20",
            "--set",
            "trainer.eval_steps=2",
            "--set",
            "trainer.save_every_steps=" + std::to_string(kSaveEvery),
            "--set",
            "trainer.keep_last=2",
            "--set",
            "dist.timeout_sec=30",
            "--set",
            "data.train_shards=/data/shards/train_*.bin",
            "--set",
            "data.val_shards=/data/shards/val_*.bin"};
}

void chmod_tree(const fs::path& root, mode_t dirs, mode_t files) {
    ::chmod(root.c_str(), dirs);
    for (const auto& e : fs::recursive_directory_iterator(root))
        ::chmod(e.path().c_str(), e.is_directory() ? dirs : files);
}

std::string pod_lines(const JobRunner& job) {
    std::string s;
    for (const auto& p : job.pods())
        s += p.name + " index " + std::to_string(p.index) + " ip " + p.ip + " exit " + std::to_string(p.exit_code) +
             " action " + (p.exit_code == 0 ? "-" : to_string(p.action)) + "\n";
    return s;
}
std::string pod_report(const JobRunner& job) { return pod_lines(job) + job.logs(); }

}  // namespace

fs::path PodScenarios::root_;

void PodScenarios::SetUpTestSuite() {
    root_ = fs::temp_directory_path() / ("llmt_k8s_pods_" + std::to_string(::getpid()));
    fs::create_directories(root_ / "datasets");
    auto r = prepare_synthetic_shards(root_ / "datasets");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // The pods run as uid 10001 and the data claim is mounted read-only (no fsGroup change there).
    chmod_tree(root_, 0755, 0644);
    // Host-root pods run the binary under test as uid 10001, which may not reach the build tree (a
    // checkout under root's 0700 home, as on a fresh machine: "env: 'llmtrain': Permission denied"),
    // so they run a copy in the suite's own directory.
    fs::create_directories(root_ / "bin");
    fs::copy_file(llmtrain_bin(), root_ / "bin" / "llmtrain", fs::copy_options::overwrite_existing);
    fs::permissions(root_ / "bin", fs::perms(0755));
    fs::permissions(root_ / "bin" / "llmtrain", fs::perms(0755));
}

void PodScenarios::TearDownTestSuite() { fs::remove_all(root_); }

// Renders the job, parses it, and gives the cluster inputs: claims as directories, the secret, the
// image's ENV (OPENBLAS_CORETYPE added as the environment sets it, in both runtimes).
JobRunner PodScenarios::make_runner(const std::string& name, const fs::path& outputs) {
    auto r = run_process(render_args(name, image_));
    if (r.exit_code != 0) throw std::runtime_error("render failed: " + r.err);
    write_file_atomic(root_ / (name + ".yaml"), r.out);
    ClusterInputs in;
    fs::create_directories(outputs);
    in.claims = {{"datasets", root_ / "datasets"}, {"outputs", outputs}};
    in.secrets["hf-token"]["HF_TOKEN"] = "hf_test_token";
    in.image_env = image_env_;
    if (runtime_ == PodRuntime::HostRoot)
        in.image_env = {{"PATH", (root_ / "bin").string() +
                                     ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}};
    if (const char* c = std::getenv("OPENBLAS_CORETYPE")) in.image_env.emplace_back("OPENBLAS_CORETYPE", c);
    return JobRunner(parse_manifests(r.out), in, root_ / ("work-" + name), kBackoffS, runtime_);
}

nlohmann::json PodScenarios::summary(const fs::path& run_dir) {
    return nlohmann::json::parse(read_file(run_dir / "summary.json"));
}

void PodScenarios::expect_pods_are_containers(const JobRunner& job) {
    if (runtime_ != PodRuntime::Podman) return;
    // `podman run` takes a few seconds to start a container under load: poll up to 60 s for all of them.
    std::string seen;
    for (int i = 0; i < 600; ++i) {
        auto r = run_process({"podman", "--runtime", "runc", "ps", "--filter", "status=running", "--filter",
                              "name=^llmk-" + job.sandbox_id() + "-", "--format", "{{.Names}} {{.Image}}"});
        seen = r.out;
        bool all = true;
        for (const auto& p : job.pods())
            if (p.running && seen.find(job.sandbox_name(p) + " " + image_ + "\n") == std::string::npos) all = false;
        if (all) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "the running pods are not all running containers of " << image_ << "; podman ps:\n"
                  << seen << pod_lines(job);
}

void PodScenarios::start_pods(JobRunner& job) {
    std::string skip;
    if (!job.start(&skip)) GTEST_SKIP() << skip;
    job.step();  // creates both pods
    ASSERT_EQ(job.pods().size(), 2u) << pod_report(job);
    expect_pods_are_containers(job);
}

void PodScenarios::two_pods_run_to_completion() {
    const fs::path outputs = root_ / "outputs-a";
    auto job = make_runner("tiny", outputs);
    const auto t0 = std::chrono::steady_clock::now();
    start_pods(job);
    if (IsSkipped() || HasFatalFailure()) return;
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

void PodScenarios::killed_pod_is_recreated_and_resumes() {
    const fs::path outputs = root_ / "outputs-b";
    auto job = make_runner("tiny", outputs);
    const auto t0 = std::chrono::steady_clock::now();
    start_pods(job);
    if (IsSkipped() || HasFatalFailure()) return;
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
    EXPECT_EQ(killed->action, Action::Count) << report;
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
    for (const auto& m : read_metrics(outputs / "tiny/metrics.jsonl"))
        if (m.contains("loss")) steps.push_back(m["step"]);
    ASSERT_EQ(steps.size(), static_cast<std::size_t>(kSteps)) << logs;
    for (std::size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(steps[i], static_cast<double>(i + 1));
    std::cout << "kill and recreate, " << kSteps << " steps: " << took << " s, " << pods.size() << " pods\n"
              << pod_lines(job);
    if (auto r = logs.find("resume: /out"); r != std::string::npos) std::cout << logs.substr(r, 80) << "\n";
}

}  // namespace llmt::testing::kjob
