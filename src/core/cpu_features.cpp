// CPU feature detection via cpuid leaf 7 and xgetbv (Intel SDM vol. 2, "CPUID"; OS-enabled state per
// XCR0 bits 1-2 for AVX and 5-7 for AVX-512).
#include "core/cpu_features.h"

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace llmt {
namespace {

#if defined(__x86_64__) || defined(__i386__)
uint64_t read_xcr0() {
    uint32_t eax = 0, edx = 0;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return (static_cast<uint64_t>(edx) << 32) | eax;
}

CpuFeatures detect() {
    CpuFeatures f;
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
    const bool osxsave = (c >> 27) & 1;
    const bool avx = (c >> 28) & 1;
    const bool fma = (c >> 12) & 1;
    if (!osxsave || !avx) return f;
    const uint64_t xcr0 = read_xcr0();
    const bool os_avx = (xcr0 & 0x6) == 0x6;
    const bool os_avx512 = (xcr0 & 0xe6) == 0xe6;
    if (!os_avx) return f;
    f.fma = fma;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
    f.avx2 = (b >> 5) & 1;
    if (os_avx512) {
        f.avx512f = (b >> 16) & 1;
        f.avx512dq = (b >> 17) & 1;
        f.avx512bw = (b >> 30) & 1;
        f.avx512vl = (b >> 31) & 1;
        f.avx512_vnni = (c >> 11) & 1;
        unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
        if (__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1)) f.avx512_bf16 = (a1 >> 5) & 1;
    }
    return f;
}
#else
CpuFeatures detect() { return {}; }
#endif

}  // namespace

std::string CpuFeatures::describe() const {
    std::string s;
    auto add = [&](bool on, const char* name) {
        if (!on) return;
        if (!s.empty()) s += ' ';
        s += name;
    };
    add(avx2, "avx2");
    add(fma, "fma");
    add(avx512f, "avx512f");
    add(avx512bw, "avx512bw");
    add(avx512vl, "avx512vl");
    add(avx512dq, "avx512dq");
    add(avx512_bf16, "avx512_bf16");
    add(avx512_vnni, "avx512_vnni");
    return s.empty() ? "baseline" : s;
}

const CpuFeatures& cpu_features() {
    static const CpuFeatures f = detect();
    return f;
}

}  // namespace llmt
