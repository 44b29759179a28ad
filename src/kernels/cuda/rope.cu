// RoPE on CUDA (cuda/rope.h): one thread per (row, rotated head, V pairs), V = 16 bytes of the storage type
// (8 bf16 / 4 fp32 pairs: a 16-byte load of x[i..i+V) and one of x[i+half..i+half+V)) where half is a
// multiple of V and qkv is 16-byte aligned, V = 1 otherwise. The table's cos/sin rows are read as floats
// (a few KiB per position: L1/L2 hits). In place: each thread reads its pairs before writing them.
#include <cstdint>

#include "kernels/cuda/chunk.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/runtime.h"

namespace llmt::kernels::cuda {
namespace {

constexpr int kBlock = 256;

// sign +1: rotate by a (forward); -1: by -a (backward). Rows of qkv: T per batch; row t uses table row pos0 + t,
// or with kPos row r = (b, t) table row positions[r] (kPos false: no position table is read).
template <typename T, int V, bool kPos>
__global__ void rope_kernel(T* qkv, const float* rope, long rows, int T_, int heads, int C3, int HS, int pos0,
                            float sign, const int32_t* positions) {
    const int half = HS / 2, per_head = half / V;
    const long n = rows * heads * per_head;
    for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<long>(gridDim.x) * blockDim.x) {
        const int k = static_cast<int>(i % per_head) * V;
        const long rh = i / per_head;
        const int h = static_cast<int>(rh % heads);
        const long row = rh / heads;
        const float* cs;
        if constexpr (kPos) cs = rope + static_cast<long>(positions[row]) * HS + k;
        else cs = rope + static_cast<long>(pos0 + static_cast<int>(row % T_)) * HS + k;
        const float* sn = cs + half;
        T* x = qkv + row * C3 + static_cast<long>(h) * HS + k;
        const Chunk<T, V> a = load_chunk<T, V>(x), b = load_chunk<T, V>(x + half);
        Chunk<T, V> ya, yb;
#pragma unroll
        for (int q = 0; q < V; q++) {
            const float c = cs[q], s = sign * sn[q];
            const float x0 = ldf(a.e[q]), x1 = ldf(b.e[q]);
            ya.e[q] = cvt<T>(x0 * c - x1 * s);
            yb.e[q] = cvt<T>(x1 * c + x0 * s);
        }
        store_chunk<T, V>(x, ya);
        store_chunk<T, V>(x + half, yb);
    }
}

template <typename T, int V>
void rope_launch(T* qkv, const float* rope, long rows, int T_, int heads, int C3, int HS, int pos0, float sign,
                 const int32_t* positions, cudaStream_t stream) {
    const long n = rows * heads * (HS / 2 / V);
    if (positions)
        rope_kernel<T, V, true>
            <<<grid_for(n, kBlock), kBlock, 0, stream>>>(qkv, rope, rows, T_, heads, C3, HS, pos0, sign, positions);
    else
        rope_kernel<T, V, false>
            <<<grid_for(n, kBlock), kBlock, 0, stream>>>(qkv, rope, rows, T_, heads, C3, HS, pos0, sign, positions);
    LLMT_CUDA_CHECK_LAUNCH("rope_kernel");
}

template <typename T>
void rope_t(T* qkv, const float* rope, int B, int T_, int NH, int KV, int HS, int pos0, float sign,
            const int32_t* positions, cudaStream_t stream) {
    constexpr int V = 16 / sizeof(T);
    const long rows = static_cast<long>(B) * T_;
    const int heads = NH + KV, C3 = (NH + 2 * KV) * HS;
    if ((HS / 2) % V == 0 && reinterpret_cast<uintptr_t>(qkv) % 16 == 0)
        rope_launch<T, V>(qkv, rope, rows, T_, heads, C3, HS, pos0, sign, positions, stream);
    else
        rope_launch<T, 1>(qkv, rope, rows, T_, heads, C3, HS, pos0, sign, positions, stream);
}

}  // namespace

#define LLMT_ROPE_FOR(T)                                                                                        \
    void rope_forward(T* qkv, const float* rope, int B, int T_, int NH, int KV, int HS, int pos0,                \
                      cudaStream_t stream, const int32_t* positions) {                                         \
        rope_t(qkv, rope, B, T_, NH, KV, HS, pos0, 1.0f, positions, stream);                                     \
    }                                                                                                           \
    void rope_backward(T* dqkv, const float* rope, int B, int T_, int NH, int KV, int HS, cudaStream_t stream,   \
                       const int32_t* positions) {                                                             \
        rope_t(dqkv, rope, B, T_, NH, KV, HS, 0, -1.0f, positions, stream);                                      \
    }
LLMT_ROPE_FOR(float)
LLMT_ROPE_FOR(bf16)
#undef LLMT_ROPE_FOR

}  // namespace llmt::kernels::cuda
