// Model FLOPs utilisation (MFU, as in the PaLM paper): the model's FLOPs per second of training over a
// peak that says what it is. The printed figure is never above 100%: a peak below what the step achieved
// was a wrong peak, so the meter raises it to the achieved rate and says so once.
#pragma once

#include <optional>
#include <string>

#include "core/tensor.h"

namespace llmt::train {

struct MfuPeak {
    double flops = 0;   // FLOP/s
    std::string what;   // what the peak is, for the log: "fp32 FMA peak of 2 threads (measured)"
};

// The peak for training on `device`: on a CPU the FMA rate of this process's threads measured per
// thread CPU second (kernels/cpu/peak_flops.h), doubled for bf16 GEMMs on a CPU with AVX512_BF16
// (cpu_bf16_gemms: trainer.precision bf16); on a GPU the H100/H200 dense bf16 datasheet rate.
MfuPeak mfu_peak(Device device, bool cpu_bf16_gemms = false);

// Not thread-safe; one per training loop.
class MfuMeter {
public:
    explicit MfuMeter(MfuPeak peak) : peak_(std::move(peak)) {}

    // The fraction of the peak that `achieved_flops` (FLOP/s) is, at most 1. When the achieved rate is
    // above the peak, the peak becomes the achieved rate and raised() returns a note for the log.
    double fraction(double achieved_flops);

    // A one-time note after the peak was raised; empty otherwise.
    std::optional<std::string> raised();

    const MfuPeak& peak() const { return peak_; }

private:
    MfuPeak peak_;
    bool raised_ = false;
    bool reported_ = false;
};

}  // namespace llmt::train
