// Inverted dropout with a stateless mask: splitmix64 (Steele et al. 2014) of seed + i, top 24 bits as a
// uniform in [0, 1).
#include "kernels/cpu/dropout.h"

#include "kernels/cpu/simd.h"

namespace llmt::kernels::cpu {
namespace {

inline uint64_t splitmix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// Keep iff the 24-bit uniform u_i >= p * 2^24.
LLMT_CPU_CLONES
void dropout_block(float* out, const float* inp, uint32_t threshold, float scale, uint64_t key, long i0, long n) {
#pragma omp simd
    for (long i = 0; i < n; i++) {
        const uint32_t u = static_cast<uint32_t>(splitmix64(key + static_cast<uint64_t>(i0 + i)) >> 40);
        out[i] = u >= threshold ? inp[i] * scale : 0.0f;
    }
}

void dropout_apply(float* out, const float* inp, float p, uint64_t seed, size_t N) {
    const uint32_t threshold = static_cast<uint32_t>(static_cast<double>(p) * (1u << 24));
    const float scale = 1.0f / (1.0f - p);
    const uint64_t key = splitmix64(seed);  // decorrelates neighbouring seeds
    constexpr long kBlock = 16384;
    const long n = static_cast<long>(N);
    const long blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
    for (long b = 0; b < blocks; b++) {
        const long i0 = b * kBlock;
        dropout_block(out + i0, inp + i0, threshold, scale, key, i0, (n - i0) < kBlock ? n - i0 : kBlock);
    }
}

}  // namespace

void dropout_forward(float* out, const float* inp, float p, uint64_t seed, size_t N) {
    dropout_apply(out, inp, p, seed, N);
}

void dropout_backward(float* dinp, const float* dout, float p, uint64_t seed, size_t N) {
    dropout_apply(dinp, dout, p, seed, N);
}

}  // namespace llmt::kernels::cpu
