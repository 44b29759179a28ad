// run.deterministic on the CPU: two runs of the same config give the same losses and the same weights,
// bit for bit (docs/config.md). Two threads, so the kernels' parallel reductions (LayerNorm's parameter
// gradients, the gradient norm) must combine in a fixed order, not in the order threads finish.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/loader.h"
#include "core/fs.h"
#include "support/tiny_run.h"

namespace llmt::train {
namespace {

std::vector<double> losses(const testing::TinyRun& t, const nlohmann::ordered_json& summary) {
    std::vector<double> out;
    for (const auto& j : t.metrics(summary))
        if (j.contains("loss")) out.push_back(j["loss"].get<double>());
    return out;
}

// The weights of the run's final checkpoint (model.safetensors, written from the fp32 arena).
std::string final_weights(const testing::TinyRun& t, const nlohmann::ordered_json& summary) {
    const auto step = summary.at("steps").get<int64_t>();
    return read_file(t.run_dir(summary) / "checkpoints" / ("step_" + std::to_string(step)) / "model.safetensors");
}

TEST(Deterministic, TwoCpuRunsAreBitwiseIdentical) {
    testing::TinyRun t("deterministic");
    // Exact equality is the claim: same config, thread count and data give the same bits.
    const std::vector<std::string> sets = {"run.deterministic=true", "trainer.max_steps=6", "run.threads=2",
                                           "model.dropout=0.1"};
    const auto a = t.train(sets), b = t.train(sets);
    const auto la = losses(t, a), lb = losses(t, b);
    ASSERT_EQ(la.size(), 6u);
    EXPECT_EQ(la, lb);
    EXPECT_NE(la.front(), la.back()) << "the runs must train (else equal weights prove nothing)";
    EXPECT_EQ(final_weights(t, a), final_weights(t, b));
}

TEST(Deterministic, RefusedOnCudaNamingTheKey) {
    testing::TinyRun t("deterministic_cuda");
    try {
        t.config({"run.deterministic=true", "run.device=cuda"});
        FAIL() << "expected a validation error";
    } catch (const config::ConfigValidationError& e) {
        ASSERT_EQ(e.issues().size(), 1u) << e.what();
        EXPECT_EQ(e.issues()[0].key, "run.deterministic");
        EXPECT_NE(e.issues()[0].message.find("run.device: cuda"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace llmt::train
