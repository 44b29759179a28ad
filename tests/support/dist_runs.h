// Suites that train TinyRuns' tiny model in one process and on several ranks through `llmtrain launch`, and
// compare the runs step by step: the suite's runs, their command lines, and the checks the data-parallel
// and the ZeRO-3 suites both make.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "support/compare.h"
#include "support/subprocess.h"
#include "support/train_fixture.h"

namespace llmt::testing {

// Losses of two runs that must agree entry by entry. The ranks sum their parts of each gradient in another
// order than one process does, the mean adds one rounding, and the ranks' loss means go through one f32
// all-reduce: weights drift by a few ulps per step, and 1e-5 relative over 20 steps is ~100x that drift.
// Two empty lists (a run that logged nothing) fail: there is nothing to compare (support/compare.h).
inline void expect_same_losses(const std::vector<double>& a, const std::vector<double>& b, const std::string& what) {
    ASSERT_TRUE(support::comparable(a, b)) << what;
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5 * std::abs(a[i])) << what << " at entry " << i;
}

// The fixture of such a suite. Suite is the test class; its static kPrefix (the temporary folder's prefix)
// and kYamlHead (tiny.yaml's run, model, trainer and dist sections) configure the suite's runs, which live
// under root_/runs/<run_id> until the suite ends.
template <class Suite>
class DistRunsTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        const ProcResult r = runs_.create(Suite::kPrefix, Suite::kYamlHead);
        root_ = runs_.root();
        ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    static void TearDownTestSuite() { runs_.remove(); }

    static std::vector<std::string> train_args(const std::string& run_id, std::vector<std::string> extra = {}) {
        return runs_.train_args(run_id, std::move(extra));
    }
    // `llmtrain launch` of nproc workers on this host with launch_flags, each running `train`.
    static std::vector<std::string> launch(int nproc, const std::vector<std::string>& launch_flags,
                                           const std::vector<std::string>& train) {
        std::vector<std::string> a = {llmtrain_bin(), "launch", "--standalone", "--nproc-per-node",
                                      std::to_string(nproc)};
        a.insert(a.end(), launch_flags.begin(), launch_flags.end());
        a.push_back("--");
        a.insert(a.end(), train.begin(), train.end());
        return a;
    }
    static std::vector<nlohmann::json> metrics(const std::string& run_id) { return runs_.metrics(run_id); }
    static std::vector<double> series(const std::string& run_id, const char* key) { return runs_.series(run_id, key); }

    // Resumes `run_id` with `resume` (a whole command line): it says `resharded` (how the optimizer state
    // was cut for the new ranks), and the run's train and val losses are then those of the uninterrupted
    // run `whole`.
    static void expect_resumes_as(const std::vector<std::string>& resume, const std::string& run_id,
                                  const std::string& resharded, const std::string& whole) {
        const ProcResult r = run_process(resume, "", 600);
        ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
        EXPECT_NE(r.err.find(resharded), std::string::npos) << r.err;
        expect_same_losses(series(whole, "loss"), series(run_id, "loss"), run_id + ": train loss");
        expect_same_losses(series(whole, "val_loss"), series(run_id, "val_loss"), run_id + ": val loss");
    }

    static inline TinyRuns runs_;
    static inline std::filesystem::path root_;
};

}  // namespace llmt::testing
