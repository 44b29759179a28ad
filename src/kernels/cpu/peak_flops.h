// The fp32 FMA throughput of this process's OpenMP threads when each has a core, measured once (~100 ms
// of CPU) with independent FMA chains in the widest ISA simd::isa() allows, per thread CPU second so that
// other load on the machine does not lower it. Used as the peak of the CPU MFU
// estimate: a nominal figure from /proc/cpuinfo is wrong under virtualisation (it reports the base
// clock, while the core runs at boost, so MFU showed > 100%) and does not know the FMA width.
#pragma once

namespace llmt::kernels::cpu {

// FLOP/s over omp_get_max_threads() threads (2 FLOP per FMA lane). Thread-safe; measured on first call.
double measured_peak_flops();

}  // namespace llmt::kernels::cpu
