// CPU feature detection (cpuid + xgetbv), read once, for runtime dispatch of SIMD kernels: the binary is
// built for baseline x86-64 and picks AVX-512 / AVX2 code paths at run time.
// Thread safety: cpu_features() is safe to call from any thread (a function-local static).
#pragma once

#include <string>

namespace llmt {

struct CpuFeatures {
    bool avx2 = false;
    bool fma = false;
    bool avx512f = false;   // with OS support for the zmm state (xgetbv)
    bool avx512bw = false;
    bool avx512vl = false;
    bool avx512dq = false;
    bool avx512_bf16 = false;
    bool avx512_vnni = false;

    // The AVX-512 subset our kernels use (F + BW + VL + DQ).
    bool has_avx512() const { return avx512f && avx512bw && avx512vl && avx512dq; }
    bool has_avx2_fma() const { return avx2 && fma; }
    std::string describe() const;  // "avx512 avx512_bf16 ..." for logs and `llmtrain version`
};

const CpuFeatures& cpu_features();

}  // namespace llmt
