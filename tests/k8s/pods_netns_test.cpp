// The two-pod Indexed Job that `llmtrain k8s render` prints, run without a cluster as Kubernetes would
// run it (tests/k8s/job_harness.h): each pod in its own network namespace with the pod's hostname and
// the headless Service's DNS names, command/args/env from the manifest, the volumes at their mountPaths,
// and the Job's failure policy applied; the pods' root filesystem is the host's (pods_image_test runs the
// same scenarios, pod_scenarios.h, in the built image). (a) both pods complete and rank 0's summary shows
// the configured final step; (b) one pod is killed -9 mid-run and recreated (same index, same output
// volume): the job resumes from the last checkpoint and ends at the same final step. Also: the harness
// refuses fields it does not implement, and fills $(VAR) and downward-API values as Kubernetes does.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/fs.h"
#include "job_harness.h"
#include "pod_scenarios.h"

namespace {

namespace fs = std::filesystem;
namespace kjob = llmt::testing::kjob;

const fs::path kSrc = LLMT_SOURCE_DIR;

class PodsInNetns : public kjob::PodScenarios {};

TEST_F(PodsInNetns, TwoPodsRunToCompletion) { two_pods_run_to_completion(); }

TEST_F(PodsInNetns, KilledPodIsRecreatedAndTheJobResumesFromTheCheckpoint) { killed_pod_is_recreated_and_resumes(); }

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
    EXPECT_THROW(kjob::instantiate(m, {1, 0, "tiny-1-abcde", "uid", "10.214.0.3"}, in, scratch / "pod"),
                 std::runtime_error);
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
