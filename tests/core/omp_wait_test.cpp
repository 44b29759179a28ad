// The OpenMP wait policy per subcommand (core/omp_wait.h): training spins briefly, decoding waits passively,
// subcommands without OpenMP compute are not re-executed at all.
#include <gtest/gtest.h>

#include <string>

#include "core/omp_wait.h"

namespace llmt {
namespace {

std::string spin_for(std::string cmd) {
    std::string self = "llmtrain";
    char* argv[] = {self.data(), cmd.data(), nullptr};
    const char* spin = omp_spin_count_for(cmd.empty() ? 1 : 2, argv);
    return spin ? spin : "(none)";
}

TEST(OmpWait, TrainingSpinsBrieflyDecodingWaitsPassively) {
    EXPECT_EQ(spin_for("train"), kOmpSpinCount);
    EXPECT_EQ(spin_for("eval"), kOmpSpinCount);
    EXPECT_EQ(spin_for("generate"), "0");
    EXPECT_EQ(spin_for("chat"), "0");
    EXPECT_EQ(spin_for("version"), "(none)");
    EXPECT_EQ(spin_for("print-config"), kOmpSpinCount);  // may run the CPU precision probe
    std::string self = "llmtrain", version = "version", json = "--json", probe = "--gemm-probe";
    char* argv[] = {self.data(), version.data(), json.data(), probe.data(), nullptr};
    EXPECT_STREQ(omp_spin_count_for(4, argv), kOmpSpinCount);
    EXPECT_EQ(spin_for("serve"), "(none)");
    EXPECT_EQ(spin_for(""), "(none)");  // no subcommand
}

}  // namespace
}  // namespace llmt
