// ReLU forward/backward: blocked element-wise loops (LLMT_CPU_CLONES picks the widest ISA at run time).
#include "kernels/cpu/relu.h"

#include "kernels/cpu/simd.h"

namespace llmt::kernels::cpu {
namespace {

constexpr long kBlock = 16384;  // elements per OpenMP work item

LLMT_CPU_CLONES
void relu_block(float* out, const float* inp, long n) {
#pragma omp simd
    for (long i = 0; i < n; i++) out[i] = inp[i] < 0.0f ? 0.0f : inp[i];  // NaN < 0 is false: NaN kept
}

LLMT_CPU_CLONES
void relu_backward_block(float* dinp, const float* dout, const float* out, long n) {
#pragma omp simd
    for (long i = 0; i < n; i++) dinp[i] = out[i] > 0.0f ? dout[i] : 0.0f;
}

template <typename Fn>
void blocked(size_t N, Fn fn) {
    const long n = static_cast<long>(N), blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (blocks > 1)
    for (long b = 0; b < blocks; b++) {
        const long i0 = b * kBlock;
        fn(i0, n - i0 < kBlock ? n - i0 : kBlock);
    }
}

}  // namespace

void relu_forward(float* out, const float* inp, size_t N) {
    blocked(N, [&](long i0, long n) { relu_block(out + i0, inp + i0, n); });
}

void relu_backward(float* dinp, const float* dout, const float* out, size_t N) {
    blocked(N, [&](long i0, long n) { relu_backward_block(dinp + i0, dout + i0, out + i0, n); });
}

}  // namespace llmt::kernels::cpu
