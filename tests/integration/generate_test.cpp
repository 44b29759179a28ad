// `llmtrain generate` through the real binary on a model trained for a few steps by `llmtrain train`:
// seeded sampling is reproducible, seeds differ, greedy continues the prompt, the context re-primes
// past block_size, and bad input exits 2.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/fs.h"
#include "support/subprocess.h"

namespace {

namespace fs = std::filesystem;
using llmt::testing::llmtrain_bin;
using llmt::testing::ProcResult;
using llmt::testing::run_process;

std::string corpus() {
    std::string s;
    const char* names[] = {"alpha", "beta", "gamma", "delta", "omega"};
    for (int d = 0; d < 300; ++d) {
        for (int i = 0; i < 10; ++i)
            s += std::string("The ") + names[(d + i) % 5] + " counts " + std::to_string(i) + " and " +
                 std::to_string(i + 1) + ".\n";
        s += "\n";
    }
    return s;
}

class GenerateTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        root_ = fs::temp_directory_path() / ("llmt_generate_" + std::to_string(::getpid()));
        fs::create_directories(root_);
        llmt::write_file_atomic(root_ / "corpus.txt", corpus());
        auto r = run_process({llmtrain_bin(), "data", "prepare", "--input", (root_ / "corpus.txt").string(),
                              "--format", "text", "--out", (root_ / "shards").string(), "--val-fraction", "0.1"},
                             "", 300);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        std::ofstream(root_ / "tiny.yaml") << R"(run: {name: g, seed: 3, device: cpu, threads: 1}
model: {n_layer: 2, n_head: 2, d_model: 32, block_size: 32, vocab_pad_multiple: 64}
trainer: {max_steps: 40, micro_batch_size: 4, lr: 3.0e-3, min_lr: 3.0e-4, warmup_steps: 2, eval_every_steps: 0}
)" << "data: {train_shards: " << (root_ / "shards/train_*.bin").string()
                                       << ", val_shards: " << (root_ / "shards/val_*.bin").string() << "}\n";
        r = run_process({llmtrain_bin(), "train", "--config", (root_ / "tiny.yaml").string(), "--set",
                         "output.root_dir=" + (root_ / "runs").string(), "--set", "output.run_id=gen"},
                        "", 600);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        run_ = root_ / "runs/gen";
    }
    static void TearDownTestSuite() { fs::remove_all(root_); }

    static ProcResult generate(std::vector<std::string> extra) {
        std::vector<std::string> args = {llmtrain_bin(), "generate", "--checkpoint", run_.string()};
        args.insert(args.end(), extra.begin(), extra.end());
        return run_process(args, "", 300);
    }
    static fs::path root_, run_;
};
fs::path GenerateTest::root_, GenerateTest::run_;

TEST_F(GenerateTest, SameSeedSameTextOtherSeedDiffers) {
    std::vector<std::string> o = {"--prompt",      "The beta", "--max-new-tokens", "40",
                                  "--temperature", "1.0",      "--top-k",          "0"};
    auto seeded = [&](const char* seed) {
        auto args = o;
        args.insert(args.end(), {"--seed", seed});
        return generate(args);
    };
    auto a = seeded("1"), b = seeded("1"), c = seeded("2");
    ASSERT_EQ(a.exit_code, 0) << a.err;
    ASSERT_EQ(b.exit_code, 0) << b.err;
    ASSERT_EQ(c.exit_code, 0) << c.err;
    EXPECT_EQ(a.out.rfind("The beta", 0), 0u) << a.out;  // the prompt is echoed first
    EXPECT_EQ(a.out, b.out);
    // 40 draws at temperature 1 from a barely trained model: equal texts for two seeds would take a
    // collision of many near-uniform draws.
    EXPECT_NE(a.out, c.out);
}

TEST_F(GenerateTest, GreedyContinuesThePromptAndStoredConfigEqualsExplicitConfig) {
    auto g = generate({"--prompt", "The gamma counts", "--temperature", "0", "--max-new-tokens", "12"});
    ASSERT_EQ(g.exit_code, 0) << g.err;
    ASSERT_EQ(g.out.rfind("The gamma counts", 0), 0u) << g.out;
    EXPECT_GT(g.out.size(), std::string("The gamma counts\n").size()) << g.out;  // something was generated
    EXPECT_NE(g.err.find("tokens in"), std::string::npos) << g.err;
    // --config with the same model gives the same greedy text as the config stored in state.json.
    auto e = generate({"--config", (root_ / "tiny.yaml").string(), "--prompt", "The gamma counts", "--temperature",
                       "0", "--max-new-tokens", "12"});
    ASSERT_EQ(e.exit_code, 0) << e.err;
    EXPECT_EQ(g.out, e.out);
    // top-k 1 at any temperature is greedy.
    auto k1 =
        generate({"--prompt", "The gamma counts", "--temperature", "3", "--top-k", "1", "--max-new-tokens", "12"});
    ASSERT_EQ(k1.exit_code, 0) << k1.err;
    EXPECT_EQ(g.out, k1.out);
}

TEST_F(GenerateTest, GoesPastTheContextByRepriming) {
    // block_size 32: 80 greedy tokens need the context re-primed (unless <|endoftext|> comes first).
    auto g = generate({"--prompt", "The delta", "--temperature", "0.5", "--max-new-tokens", "80", "--seed", "4"});
    ASSERT_EQ(g.exit_code, 0) << g.err;
    if (g.err.find("stopped at <|endoftext|>") == std::string::npos) {
        EXPECT_NE(g.err.find("re-primed"), std::string::npos) << g.err;
    }
    EXPECT_NE(g.err.find("tokens in"), std::string::npos) << g.err;
}

TEST_F(GenerateTest, EmptyPromptStartsFromEndOfText) {
    auto g = generate({"--prompt", "", "--max-new-tokens", "10", "--seed", "5"});
    ASSERT_EQ(g.exit_code, 0) << g.err;
    // Text came out, unless the very first token sampled was <|endoftext|> itself.
    if (g.err.find("generate: 1 tokens") == std::string::npos) {
        EXPECT_GT(g.out.size(), 1u) << g.err;
    }
    EXPECT_EQ(g.out.back(), '\n');
}

TEST_F(GenerateTest, BadInputExitsTwo) {
    auto r =
        run_process({llmtrain_bin(), "generate", "--checkpoint", (root_ / "no/such/run").string(), "--prompt", "x"});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("no/such/run"), std::string::npos) << r.err;
    std::string long_prompt;
    for (int i = 0; i < 40; ++i) long_prompt += " alpha";  // 40 tokens > block_size 32
    r = generate({"--prompt", long_prompt});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("block_size 32"), std::string::npos) << r.err;
    r = generate({"--prompt", "x", "--temperature", "-1"});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;  // validated before anything is printed
}

}  // namespace
