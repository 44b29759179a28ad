// ISA selection for the hand-written SIMD kernels (simd.h).
#include "kernels/cpu/simd.h"

#include "core/knobs.h"

namespace llmt::kernels::cpu::simd {
namespace {

Isa best() {
    const CpuFeatures& f = cpu_features();
    return f.has_avx512() ? Isa::kAvx512 : f.has_avx2_fma() ? Isa::kAvx2 : Isa::kScalar;
}

}  // namespace

// LLMTRAIN_CPU_ISA (core/knobs.h): auto|scalar|avx2|avx512, a cap on what this CPU has. Read per call
// (an array load) so tests can switch it with ScopedKnob; best() is computed once.
Isa isa() {
    static const Isa widest = best();
    switch (knob_choice(Knob::kCpuIsa)) {
        case 1: return Isa::kScalar;
        case 2: return widest == Isa::kScalar ? Isa::kScalar : Isa::kAvx2;
        default: return widest;
    }
}

const char* isa_name(Isa i) {
    switch (i) {
        case Isa::kAvx512: return "avx512";
        case Isa::kAvx2: return "avx2";
        default: return "scalar";
    }
}

}  // namespace llmt::kernels::cpu::simd
