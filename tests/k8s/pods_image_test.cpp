// The two-pod Indexed Job scenarios of pods_netns_test (pod_scenarios.h), with each pod's container run
// from the built image (`make image`: localhost/llmtrain:latest, or $IMAGE_TAG) by
// `podman --runtime runc run` joined to the pod's network namespace, as the manifest's image, user,
// env, command, args and volumes say. Label `image` (not in `make test`; `make test-image` after
// `make image`). Skips, saying why, where podman cannot run a container here or the image is not built.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <string>

#include "pod_scenarios.h"
#include "support/subprocess.h"

namespace {

namespace kjob = llmt::testing::kjob;
using llmt::testing::run_process;

std::string image_tag() {
    const char* t = std::getenv("IMAGE_TAG");  // as deploy/image/build.sh names it
    return t && *t ? t : "localhost/llmtrain:latest";
}

class PodsInImage : public kjob::PodScenarios {
protected:
    void SetUp() override {
        const std::string tag = image_tag();
        const std::vector<std::string> podman = {"podman", "--runtime", "runc"};
        auto with = [&](std::vector<std::string> args) {
            args.insert(args.begin(), podman.begin(), podman.end());
            return args;
        };
        auto exists = run_process(with({"image", "exists", tag}), "", 60);
        if (exists.exit_code == 127) GTEST_SKIP() << "podman is not installed (scripts/setup.sh installs it)";
        if (exists.exit_code == 1) GTEST_SKIP() << "image " << tag << " does not exist: run `make image` first";
        ASSERT_EQ(exists.exit_code, 0) << "podman image exists " << tag << ": " << exists.err;
        // Can podman run a container of it here at all (runc, overlay storage, namespaces)? /bin/true, not
        // llmtrain: a broken llmtrain in the image must fail the scenarios, not skip them. The limits as
        // deploy/image/build.sh sets them (runc cannot raise nofile past this process's hard limit).
        rlimit nofile{};
        ::getrlimit(RLIMIT_NOFILE, &nofile);
        const auto n = std::to_string(std::min<rlim_t>(nofile.rlim_max, 65536));
        auto probe = run_process(with({"run", "--rm", "--pull", "never", "--network", "none", "--ulimit",
                                       "nofile=" + n + ":" + n, "--ulimit", "nproc=32768:32768", "--entrypoint",
                                       "[\"/bin/true\"]", tag}),
                                 "", 120);
        if (probe.exit_code != 0)
            GTEST_SKIP() << "podman cannot run a container of " << tag << " here (exit " << probe.exit_code
                         << "): " << probe.err;
        // The image's ENV: what the kubelet starts a container's environment from.
        auto env =
            run_process(with({"image", "inspect", "--format", "{{range .Config.Env}}{{println .}}{{end}}", tag}));
        ASSERT_EQ(env.exit_code, 0) << env.err;
        std::istringstream lines(env.out);
        for (std::string l; std::getline(lines, l);)
            if (auto eq = l.find('='); eq != std::string::npos)
                image_env_.emplace_back(l.substr(0, eq), l.substr(eq + 1));
        runtime_ = kjob::PodRuntime::Podman;
        image_ = tag;
    }
};

TEST_F(PodsInImage, TwoPodsRunToCompletion) { two_pods_run_to_completion(); }

TEST_F(PodsInImage, KilledPodIsRecreatedAndTheJobResumesFromTheCheckpoint) { killed_pod_is_recreated_and_resumes(); }

}  // namespace
