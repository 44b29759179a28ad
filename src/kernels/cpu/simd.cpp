// ISA selection for the hand-written SIMD kernels (simd.h).
#include "kernels/cpu/simd.h"

#include <atomic>
#include <cstdlib>
#include <string_view>

namespace llmt::kernels::cpu::simd {
namespace {

Isa best() {
    const CpuFeatures& f = cpu_features();
    return f.has_avx512() ? Isa::kAvx512 : f.has_avx2_fma() ? Isa::kAvx2 : Isa::kScalar;
}

Isa clamp(Isa want) { return static_cast<int>(want) <= static_cast<int>(best()) ? want : best(); }

Isa initial() {
    const char* env = std::getenv("LLMTRAIN_CPU_ISA");
    if (!env) return best();
    const std::string_view v(env);
    if (v == "scalar") return Isa::kScalar;
    if (v == "avx2") return clamp(Isa::kAvx2);
    return best();  // "avx512" or anything else: the best available (an env var is only a cap)
}

std::atomic<int>& current() {
    static std::atomic<int> v{static_cast<int>(initial())};
    return v;
}

}  // namespace

Isa isa() { return static_cast<Isa>(current().load(std::memory_order_relaxed)); }

Isa set_isa(Isa want) {
    const Isa got = clamp(want);
    current().store(static_cast<int>(got));
    return got;
}

const char* isa_name(Isa i) {
    switch (i) {
        case Isa::kAvx512: return "avx512";
        case Isa::kAvx2: return "avx2";
        default: return "scalar";
    }
}

}  // namespace llmt::kernels::cpu::simd
