// The CLI through the real binary: exit codes (0 ok, 2 bad input), --json on stdout, messages on stderr.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "config/schema.h"
#include "support/subprocess.h"

namespace {

using llmt::testing::llmtrain_bin;
using llmt::testing::ProcResult;
using llmt::testing::run_process;

const std::string kPreset = std::string(LLMT_SOURCE_DIR) + "/configs/presets/gpt2_tiny_cpu.yaml";

ProcResult llmtrain(std::vector<std::string> args, const std::vector<std::string>& env = {}) {
    args.insert(args.begin(), llmtrain_bin());
    return run_process(args, "", 60, env);
}

class CliTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = std::filesystem::temp_directory_path() /
               ("llmt_cli_" + std::to_string(::getpid()) + "_" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::create_directories(dir_);
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }
    std::string write(const std::string& name, const std::string& content) {
        auto p = dir_ / name;
        std::ofstream(p, std::ios::binary) << content;
        return p.string();
    }
    std::filesystem::path dir_;
};

TEST_F(CliTest, HelpDocumentsExitCodes) {
    auto r = llmtrain({"--help"});
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_NE(r.out.find("Exit codes"), std::string::npos);
    EXPECT_NE(r.out.find("validate"), std::string::npos);
}

TEST_F(CliTest, NoSubcommandOrUnknownFlagIsUsageError) {
    EXPECT_EQ(llmtrain({}).exit_code, 2);
    auto r = llmtrain({"validate", "--config", kPreset, "--bogus"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--bogus"), std::string::npos);
    EXPECT_EQ(llmtrain({"validate"}).exit_code, 2);  // --config is required
}

TEST_F(CliTest, VersionJson) {
    auto r = llmtrain({"version", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    for (const char* k : {"version", "git_sha", "build_type", "cuda", "blas", "knobs"})
        EXPECT_TRUE(j.contains(k)) << k;
}

// The knobs of core/knobs.h: listed with value and default, a set one shows as set, and the human
// output says where they are documented and which differ from their defaults.
TEST_F(CliTest, VersionListsKnobs) {
    auto r = llmtrain({"version", "--json"}, {"LLMTRAIN_FUSE_RESIDUAL=0"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto knobs = nlohmann::json::parse(r.out)["knobs"];
    ASSERT_GE(knobs.size(), 10u);
    bool seen = false;
    for (const auto& k : knobs) {
        for (const char* f : {"name", "value", "default", "set", "choices", "changes", "doc"})
            EXPECT_TRUE(k.contains(f)) << k.dump() << " lacks " << f;
        if (k["name"] == "LLMTRAIN_FUSE_RESIDUAL") {
            seen = true;
            EXPECT_EQ(k["value"], "0");
            EXPECT_EQ(k["default"], "1");
            EXPECT_TRUE(k["set"].get<bool>());
        } else if (k["name"] == "LLMTRAIN_GEMM") {
            EXPECT_EQ(k["value"], "auto");
            EXPECT_FALSE(k["set"].get<bool>());
        }
    }
    EXPECT_TRUE(seen) << knobs.dump();
    auto h = llmtrain({"version"}, {"LLMTRAIN_FUSE_RESIDUAL=0"});
    ASSERT_EQ(h.exit_code, 0) << h.err;
    EXPECT_NE(h.out.find("src/kernels/README.md#knobs"), std::string::npos) << h.out;
    EXPECT_NE(h.out.find("LLMTRAIN_FUSE_RESIDUAL=0 (default 1)"), std::string::npos) << h.out;
}

// A value outside a knob's choices is refused before any command runs (exit 2), naming the variable.
TEST_F(CliTest, BadKnobValueIsInputError) {
    auto r = llmtrain({"version"}, {"LLMTRAIN_GEMM=mkl"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("LLMTRAIN_GEMM='mkl'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("auto|onednn|openblas"), std::string::npos) << r.err;
}

TEST_F(CliTest, ValidatePresetOk) {
    auto r = llmtrain({"validate", "--config", kPreset});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    r = llmtrain({"validate", "--config", kPreset, "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(nlohmann::json::parse(r.out)["ok"].get<bool>());
}

// validate --json reports the training memory estimate; --max-memory takes sizes and refuses junk.
TEST_F(CliTest, ValidateReportsMemoryAndTakesMaxMemory) {
    auto r = llmtrain({"validate", "--config", kPreset, "--json", "--max-memory", "64GiB"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto mem = nlohmann::json::parse(r.out)["memory_bytes"];
    EXPECT_GT(mem["parameters"].get<std::uint64_t>(), 0u) << mem.dump();
    EXPECT_EQ(mem["total"].get<std::uint64_t>(), mem["parameters"].get<std::uint64_t>() +
                                                     mem["gradients"].get<std::uint64_t>() +
                                                     mem["optimizer"].get<std::uint64_t>() +
                                                     mem["activations"].get<std::uint64_t>());
    EXPECT_EQ(mem["limit"].get<std::uint64_t>(), 64ull << 30);
    r = llmtrain({"validate", "--config", kPreset, "--max-memory", "lots"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--max-memory: 'lots' is not a size"), std::string::npos) << r.err;
    // --world-size sizes one rank of a ZeRO-1 job: the optimizer state divided (fp32 on the CPU: the weights stay).
    r = llmtrain({"validate", "--config", kPreset, "--json", "--world-size", "2", "--set", "dist.zero_stage=1"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto two = nlohmann::json::parse(r.out)["memory_bytes"];
    EXPECT_EQ(two["optimizer"].get<std::uint64_t>(), (mem["optimizer"].get<std::uint64_t>() + 1) / 2) << two.dump();
    EXPECT_EQ(two["parameters"].get<std::uint64_t>(), mem["parameters"].get<std::uint64_t>());
    r = llmtrain({"validate", "--config", kPreset, "--world-size", "0"});
    EXPECT_EQ(r.exit_code, 2) << r.err;
}

// An empty --resume is a usage error, not a fresh run.
TEST_F(CliTest, EmptyResumeIsUsageError) {
    auto r = llmtrain({"train", "--config", kPreset, "--resume", ""});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--resume needs a path, a run id or 'auto'"), std::string::npos) << r.err;
}

TEST_F(CliTest, PrintConfigJsonHasEveryKey) {
    auto r = llmtrain({"print-config", "--config", kPreset, "--json", "--set", "trainer.lr=3e-4"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::ordered_json::parse(r.out);  // exactly one JSON document on stdout
    EXPECT_DOUBLE_EQ(j["trainer"]["lr"].get<double>(), 3e-4);
    for (const auto& f : llmt::config::schema_fields())
        EXPECT_TRUE(llmt::config::resolved_value(j, f.path)) << f.path;
}

TEST_F(CliTest, PrintConfigYamlValidatesAgain) {
    auto r = llmtrain({"print-config", "--config", kPreset});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto again = write("again.yaml", r.out);
    auto v = llmtrain({"print-config", "--config", again, "--json"});
    auto orig = llmtrain({"print-config", "--config", kPreset, "--json"});
    ASSERT_EQ(v.exit_code, 0) << v.err;
    EXPECT_EQ(nlohmann::json::parse(v.out), nlohmann::json::parse(orig.out));
}

TEST_F(CliTest, SetWorksOnEveryConfigSubcommand) {
    for (const char* cmd : {"validate", "print-config"}) {
        auto r = llmtrain({cmd, "--config", kPreset, "--set", "trainer.lr=oops"});
        EXPECT_EQ(r.exit_code, 2) << cmd;
        EXPECT_NE(r.err.find("--set trainer.lr=oops"), std::string::npos) << r.err;
    }
}

// Each bad input: exit 2 (never a signal, never 0) and a message naming the problem.
TEST_F(CliTest, BadInputsExitTwoWithAMessage) {
    std::string big(10 << 20, 'a');
    std::string deep = "a: ";
    for (int i = 0; i < 3000; ++i) deep += "[";
    std::string binary;
    for (int i = 0; i < 4096; ++i) binary.push_back(static_cast<char>((i * 7919) & 0xFF));
    struct Case {
        std::string name, content, expect;
    } cases[] = {
        {"empty.yaml", "", "empty"},
        {"list.yaml", "- a\n- b\n", "top level is a list"},
        {"binary.yaml", binary, "binary"},
        {"big.yaml", big, "limited to"},
        {"deep.yaml", deep, "deep"},
        {"dup.yaml", "trainer:\n  lr: 1\n  lr: 2\n", "duplicate key"},
        {"tabs.yaml", "trainer:\n\tlr: 1\n", "tab character"},
        {"latin1.yaml", "run:\n  name: caf\xe9\n", "invalid UTF-8"},
        {"unknown.yaml", "trainer:\n  lr_warmup: 5\n", "did you mean `trainer.warmup_steps`"},
    };
    for (const auto& c : cases) {
        auto path = write(c.name, c.content);
        for (bool json : {false, true}) {
            std::vector<std::string> args = {"validate", "--config", path};
            if (json) args.push_back("--json");
            auto r = llmtrain(args);
            SCOPED_TRACE(c.name + (json ? " --json" : ""));
            EXPECT_FALSE(r.signaled) << "signal " << r.signal;
            EXPECT_EQ(r.exit_code, 2) << r.err;
            EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
            EXPECT_NE(r.err.find(c.name), std::string::npos) << "message should name the file: " << r.err;
            if (json) {
                auto j = nlohmann::json::parse(r.out);
                EXPECT_FALSE(j["ok"].get<bool>());
                EXPECT_FALSE(j["errors"].empty());
            }
        }
    }
    auto r = llmtrain({"validate", "--config", (dir_ / "missing.yaml").string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("missing.yaml"), std::string::npos);
    r = llmtrain({"validate", "--config", dir_.string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("directory"), std::string::npos);
}

}  // namespace
