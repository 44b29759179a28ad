// The two scenarios of the rendered two-pod Indexed Job run without a cluster (tests/k8s/job_harness.h),
// shared by pods_netns_test (pods on the host's root filesystem) and pods_image_test (pods in the built
// image under podman): (a) both pods complete and rank 0's summary shows the configured final step;
// (b) pod 1 is killed -9 after the first checkpoint and recreated (same index, same output volume): the
// job resumes from that checkpoint and ends at the same final step, every step logged once.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "job_harness.h"

namespace llmt::testing::kjob {

class PodScenarios : public ::testing::Test {
protected:
    // Synthetic shards in the "datasets" claim, readable by the pods' uid 10001.
    static void SetUpTestSuite();
    static void TearDownTestSuite();

    // What differs between the runtimes. HostRoot: the llmtrain under test first on PATH, the manifest's
    // image only a name. Podman: the manifest's image is `image`, whose ENV (`image_env`) the pods start from.
    PodRuntime runtime_ = PodRuntime::HostRoot;
    std::string image_ = "llmtrain:test";
    std::vector<std::pair<std::string, std::string>> image_env_;

    void two_pods_run_to_completion();
    void killed_pod_is_recreated_and_resumes();

private:
    JobRunner make_runner(const std::string& name, const std::filesystem::path& outputs);
    // Starts the job and creates its two pods; skips where the runtime is unavailable (the caller returns
    // on IsSkipped() or HasFatalFailure()).
    void start_pods(JobRunner& job);
    // Podman only: every running pod of the job is a running container of image_ (checked while they run).
    void expect_pods_are_containers(const JobRunner& job);
    static nlohmann::json summary(const std::filesystem::path& run_dir);
    static std::filesystem::path root_;
};

}  // namespace llmt::testing::kjob
