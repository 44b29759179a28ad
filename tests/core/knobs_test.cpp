// The knob table (core/knobs.h): one entry per Knob in order, defaults among the choices, environment
// values validated with a message naming the variable, ScopedKnob restoring what it replaced; the location
// table likewise, read at each use; and the sources: no LLMTRAIN_* variable read outside the two tables,
// no other variable read than those the ecosystem defines.
#include "core/knobs.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>

#include "core/error.h"

namespace llmt {
namespace {

TEST(Knobs, TableIsInKnobOrderWithValidDefaults) {
    const auto table = knob_table();
    ASSERT_EQ(table.size(), static_cast<size_t>(Knob::kCount));
    std::set<std::string> names;
    for (size_t i = 0; i < table.size(); ++i) {
        const KnobInfo& k = table[i];
        EXPECT_EQ(static_cast<size_t>(k.knob), i) << k.name;
        EXPECT_TRUE(names.insert(k.name).second) << "duplicate " << k.name;
        EXPECT_EQ(std::string(k.name).rfind("LLMTRAIN_", 0), 0u) << k.name;
        EXPECT_NE(std::string(k.choices).find(k.dflt), std::string::npos) << k.name;
        EXPECT_GT(std::string(k.changes).size(), 10u) << k.name;
        EXPECT_GT(std::string(k.doc).size(), 0u) << k.name;
        // Unset in the test environment (ctest sets none), so every knob reads as its default.
        if (!std::getenv(k.name)) {
            EXPECT_EQ(knob_text(k.knob), k.dflt) << k.name;
        }
    }
}

TEST(Knobs, ScopedKnobSetsAndRestores) {
    const bool before = knob_on(Knob::kFuseResidual);
    {
        ScopedKnob off(Knob::kFuseResidual, "0");
        EXPECT_FALSE(knob_on(Knob::kFuseResidual));
        EXPECT_EQ(knob_text(Knob::kFuseResidual), "0");
        {
            ScopedKnob on(Knob::kFuseResidual, "1");
            EXPECT_TRUE(knob_on(Knob::kFuseResidual));
        }
        EXPECT_FALSE(knob_on(Knob::kFuseResidual));
    }
    EXPECT_EQ(knob_on(Knob::kFuseResidual), before);
    {
        ScopedKnob isa(Knob::kCpuIsa, "avx2");
        EXPECT_EQ(knob_choice(Knob::kCpuIsa), 2);  // auto|scalar|avx2|avx512
        EXPECT_EQ(knob_text(Knob::kCpuIsa), "avx2");
    }
}

TEST(Knobs, BadValueNamesTheVariableAndTheChoices) {
    try {
        ScopedKnob bad(Knob::kGemm, "mkl");
        FAIL() << "accepted LLMTRAIN_GEMM=mkl";
    } catch (const InputError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("LLMTRAIN_GEMM='mkl'"), std::string::npos) << msg;
        EXPECT_NE(msg.find("auto|onednn|openblas"), std::string::npos) << msg;
    }
    EXPECT_THROW(ScopedKnob(Knob::kCudaSync, "yes"), InputError);
}

TEST(Locations, TableIsInOrderAndReadAtEachUse) {
    const auto& table = location_table();
    ASSERT_EQ(table.size(), static_cast<size_t>(Location::kCount));
    std::set<std::string> names;
    for (const KnobInfo& k : knob_table()) names.insert(k.name);
    for (size_t i = 0; i < table.size(); ++i) {
        const LocationInfo& l = table[i];
        EXPECT_EQ(static_cast<size_t>(l.location), i) << l.name;
        EXPECT_TRUE(names.insert(l.name).second) << "duplicate " << l.name;
        EXPECT_EQ(std::string(l.name).rfind("LLMTRAIN_", 0), 0u) << l.name;
        EXPECT_GT(std::string(l.what).size(), 10u) << l.name;
        EXPECT_GT(std::string(l.doc).size(), 0u) << l.name;
    }
    ASSERT_EQ(::setenv("LLMTRAIN_THROUGHPUT_FILE", "/tmp/rows.jsonl", 1), 0);
    EXPECT_EQ(location_value(Location::kThroughputFile), "/tmp/rows.jsonl");
    ASSERT_EQ(::unsetenv("LLMTRAIN_THROUGHPUT_FILE"), 0);
    EXPECT_EQ(location_value(Location::kThroughputFile), "");
}

// Every getenv in src/: a literal name must be one the ecosystem defines (torchrun, OpenMP, NCCL, AWS,
// MLflow, the shell) and never LLMTRAIN_*, which only core/knobs.cpp reads; a line that reads the
// environment through a variable must not name an LLMTRAIN_* variable either, and only the reviewed
// readers below do that (each reads names of one family: a new one is added here after review).
// Beyond the list of torchrun's and the shell's names: LOCAL_WORLD_SIZE (torchrun's worker level), PET_*
// (torchrun's flags as Kubeflow sets them), JOB_COMPLETION_INDEX (an Indexed Job's pod index), LOGNAME
// (POSIX's login name, after USER).
TEST(EnvironmentReads, OnlyTheTablesReadLlmtrainVariables) {
    namespace fs = std::filesystem;
    const std::regex allowed(
        "MASTER_ADDR|MASTER_PORT|WORLD_SIZE|RANK|LOCAL_RANK|LOCAL_WORLD_SIZE|CUDA_VISIBLE_DEVICES|"
        "GLOO_SOCKET_IFNAME|(TORCHELASTIC|TORCH|OMP|GOMP|NCCL|AWS|MLFLOW|PET)_[A-Z0-9_]+|KUBECTL|HOME|USER|PATH|"
        "TMPDIR|JOB_COMPLETION_INDEX|LOGNAME");
    const std::regex literal_read(R"re(getenv\s*\(\s*"([A-Za-z0-9_]+)")re");
    const std::regex call_through_variable(R"re(getenv(_fn)?\s*\(\s*[A-Za-z_])re");
    const std::set<std::string> indirect_readers = {
        "distributed/env.cpp",               // torchrun's worker level, through an injectable getenv
        "launch/node_env.cpp",        // the node level: flags' variables, PET_*, JOB_COMPLETION_INDEX, RANK
        "storage/s3_settings.cpp",    // AWS_* and HOME
        "tracking/mlflow_file_store.cpp",  // USER, LOGNAME
        "tracking/mlflow_rest_store.cpp",  // MLFLOW_TRACKING_*
    };
    int reads = 0;
    for (const auto& e : fs::recursive_directory_iterator(fs::path(LLMT_SOURCE_DIR) / "src")) {
        const std::string ext = e.path().extension().string();
        if (!e.is_regular_file() || (ext != ".cpp" && ext != ".h" && ext != ".cu" && ext != ".cuh")) continue;
        if (e.path().filename() == "knobs.cpp") continue;
        std::ifstream in(e.path());
        std::string line;
        for (int n = 1; std::getline(in, line); ++n) {
            if (line.find("getenv") == std::string::npos) continue;
            const std::string where = fmt::format("{}:{}: {}", e.path().string(), n, line);
            for (std::sregex_iterator m(line.begin(), line.end(), literal_read), end; m != end; ++m) {
                ++reads;
                EXPECT_TRUE(std::regex_match((*m)[1].str(), allowed)) << where;
            }
            EXPECT_EQ(line.find("LLMTRAIN_"), std::string::npos) << where;
            const bool comment = line.find_first_not_of(" \t") != std::string::npos &&
                                 line.compare(line.find_first_not_of(" \t"), 2, "//") == 0;
            if (!comment && std::regex_search(line, call_through_variable)) {
                const std::string rel = fs::relative(e.path(), fs::path(LLMT_SOURCE_DIR) / "src").string();
                EXPECT_TRUE(indirect_readers.count(rel)) << where << ": reads the environment through a variable; "
                                                       << "read a literal name, or review and list this reader";
            }
        }
    }
    EXPECT_GT(reads, 5) << "the scan found no getenv call: is LLMT_SOURCE_DIR the checkout?";
}

}  // namespace
}  // namespace llmt
