// The knob table (core/knobs.h): one entry per Knob in order, defaults among the choices, environment
// values validated with a message naming the variable, ScopedKnob restoring what it replaced.
#include "core/knobs.h"

#include <gtest/gtest.h>

#include <cstdlib>
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

}  // namespace
}  // namespace llmt
