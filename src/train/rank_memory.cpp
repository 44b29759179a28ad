// Memory of one rank (rank_memory.h).
#include "train/rank_memory.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "kernels/ops.h"

namespace llmt::train {

std::uint64_t rank_memory_bytes(Device device) {
    if (device == Device::kCuda) {
        const auto m = kernels::device_memory_info(device);
        return m.total - m.free;
    }
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line)) {  // "VmHWM:	  123456 kB"
        unsigned long long kib = 0;
        if (std::sscanf(line.c_str(), "VmHWM: %llu kB", &kib) == 1) return kib * 1024;
    }
    return 0;
}

const char* rank_memory_what(Device device) { return device == Device::kCuda ? "GPU memory in use" : "peak RSS"; }

}  // namespace llmt::train
