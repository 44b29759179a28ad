// MfuMeter: the printed MFU is never above 100%, and a peak below the achieved rate is raised and noted.
#include "train/mfu.h"

#include "core/cpu_features.h"

#include <gtest/gtest.h>

namespace llmt::train {
namespace {

TEST(MfuMeter, FractionOfThePeak) {
    MfuMeter m({100e9, "test peak"});
    EXPECT_DOUBLE_EQ(m.fraction(25e9), 0.25);
    EXPECT_FALSE(m.raised().has_value());
    EXPECT_DOUBLE_EQ(m.peak().flops, 100e9);
}

TEST(MfuMeter, AnAchievedRateAboveThePeakRaisesThePeakOnce) {
    // A probe made while the process did not get its cores read low; the step then "ran at 286%".
    MfuMeter m({100e9, "test peak"});
    EXPECT_DOUBLE_EQ(m.fraction(286e9), 1.0);
    auto note = m.raised();
    ASSERT_TRUE(note.has_value());
    EXPECT_NE(note->find("286.0 GFLOP/s"), std::string::npos) << *note;
    EXPECT_FALSE(m.raised().has_value()) << "the note is logged once";
    EXPECT_DOUBLE_EQ(m.fraction(143e9), 0.5) << "later steps are measured against the raised peak";
}

TEST(MfuMeter, NoPeakIsNeverAboveOne) {
    MfuMeter m({0.0, "none"});
    EXPECT_DOUBLE_EQ(m.fraction(5e9), 1.0);
    EXPECT_DOUBLE_EQ(m.fraction(0.0), 0.0);
}

TEST(MfuPeak, CpuPeakSaysWhatItIs) {
    const MfuPeak p = mfu_peak(Device::kCpu);
    EXPECT_GT(p.flops, 0);
    EXPECT_NE(p.what.find("GFLOP/s"), std::string::npos) << p.what;
}

// bf16 GEMMs on a CPU with AVX512_BF16 reach up to twice the fp32 FMA rate (vdpbf16ps): an MFU against the
// fp32 peak would read up to 2x too high (it printed 97% at 1 thread on the Zen 4).
TEST(MfuPeak, CpuBf16PeakIsTwiceTheFp32OneWhereTheCpuHasIt) {
    const MfuPeak fp32 = mfu_peak(Device::kCpu), bf16 = mfu_peak(Device::kCpu, true);
    if (!llmt::cpu_features().avx512_bf16) {
        EXPECT_DOUBLE_EQ(bf16.flops, fp32.flops);
        GTEST_SKIP() << "this CPU has no AVX512_BF16: the bf16 peak is the fp32 one (checked)";
    }
    // The fp32 rate is measured once per process (kernels/cpu/peak_flops.h), so the ratio is exact.
    EXPECT_DOUBLE_EQ(bf16.flops, 2 * fp32.flops) << fp32.what << " | " << bf16.what;
    EXPECT_NE(bf16.what.find("bf16"), std::string::npos) << bf16.what;
}

}  // namespace
}  // namespace llmt::train
