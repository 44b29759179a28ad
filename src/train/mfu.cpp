// MFU against a peak that is never below what was achieved (mfu.h).
#include "train/mfu.h"

#include <fmt/format.h>

#include "core/cpu_features.h"
#include "kernels/ops.h"

namespace llmt::train {

MfuPeak mfu_peak(Device device, bool cpu_bf16_gemms) {
    if (device == Device::kCuda) return {989e12, "989 TFLOP/s, the H100/H200 dense bf16 datasheet rate"};
    const double flops = kernels::cpu_peak_flops();
    if (cpu_bf16_gemms && cpu_features().avx512_bf16)
        return {2 * flops, fmt::format("{:.1f} GFLOP/s, twice the fp32 FMA rate of this process's threads measured "
                                       "per thread CPU second (bf16 GEMMs: vdpbf16ps does two products per fp32 lane)",
                                       2 * flops / 1e9)};
    return {flops, fmt::format("{:.1f} GFLOP/s, the fp32 FMA rate of this process's threads, measured per "
                               "thread CPU second",
                               flops / 1e9)};
}

double MfuMeter::fraction(double achieved_flops) {
    if (!(peak_.flops > 0) || achieved_flops > peak_.flops) {
        peak_.flops = achieved_flops;
        raised_ = true;
    }
    return peak_.flops > 0 ? achieved_flops / peak_.flops : 0.0;
}

std::optional<std::string> MfuMeter::raised() {
    if (!raised_ || reported_) return std::nullopt;
    reported_ = true;
    return fmt::format("mfu: a step ran at {:.1f} GFLOP/s, above the peak; the peak is now that rate",
                       peak_.flops / 1e9);
}

}  // namespace llmt::train
