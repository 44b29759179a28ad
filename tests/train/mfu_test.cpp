// MfuMeter: the printed MFU is never above 100%, and a peak below the achieved rate is raised and noted.
#include "train/mfu.h"

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

}  // namespace
}  // namespace llmt::train
