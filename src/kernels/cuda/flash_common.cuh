// The flash attention kernels' shared device helpers (flash_attention_kernels.cuh has the algorithm): the
// mma.sync / ldmatrix / cp.async PTX wrappers, bf16 packing, the tile loader and the block order of the grids.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/key_bounds.cuh"

namespace llmt::kernels::cuda::flash {
namespace {

using bf16 = __nv_bfloat16;

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// ---- PTX wrappers ---------------------------------------------------------------------------------

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte global->shared copy; src_bytes 0 zero-fills the destination (rows past T).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
    const int n = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(n));
}
// 4-byte global->shared copy (lse / dvec rows); zero-filled when !valid.
__device__ __forceinline__ void cp_async4(void* dst, const void* src, bool valid) {
    const int n = valid ? 4 : 0;
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(n));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const bf16* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], const bf16* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

// d += a (16x16, row-major fragment) * b (16x8, column-major fragment), fp32 accumulators.
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float fast_exp2(float x) {  // ex2.approx: 2 ulp, exp2(-inf) = +0
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (low half) = lo
    return *reinterpret_cast<const uint32_t*>(&v);
}

// The C fragments of two adjacent 16x8 accumulator tiles form the A fragment of one 16x16 operand.
__device__ __forceinline__ void c_to_a(uint32_t (&a)[4], const float (&c0)[4], const float (&c1)[4]) {
    a[0] = pack_bf16(c0[0], c0[1]);
    a[1] = pack_bf16(c0[2], c0[3]);
    a[2] = pack_bf16(c1[0], c1[1]);
    a[3] = pack_bf16(c1[2], c1[3]);
}

// ROWS x D tile from global rows row0.. (stride ld elements) into shared memory (stride D + 8); rows at or
// past T are zero-filled.
template <int ROWS, int D, int NT>
__device__ __forceinline__ void load_tile(bf16* s, const bf16* g, long ld, int row0, int T) {
    constexpr int kChunks = D / 8;  // 16-byte chunks per row
    static_assert((ROWS * kChunks) % NT == 0, "tile chunks must divide over the threads");
#pragma unroll
    for (int c = threadIdx.x; c < ROWS * kChunks; c += NT) {
        const int r = c / kChunks, k = c % kChunks, gr = row0 + r;
        const bool ok = gr < T;
        cp_async16(s + r * (D + 8) + k * 8, g + static_cast<long>(ok ? gr : 0) * ld + k * 8, ok);
    }
}

// Block order of the 1-D grids: heads are taken G at a time; inside such a group the tiles go in order of
// decreasing work (rank 0 = heaviest), heads fastest. Small G keeps the blocks in flight on few heads, so
// their K/V (forward) or Q/dO (backward) stay in L2; large G puts the heaviest tiles of all heads first,
// which balances small grids. Returns (head index b*NH+h, rank).
__device__ __forceinline__ int2 block_order(int n_tiles, int n_heads, int G) {
    const int idx = static_cast<int>(blockIdx.x), group = idx / (G * n_tiles), r = idx % (G * n_tiles);
    const int g_size = min(G, n_heads - group * G);  // the last group may be partial
    return make_int2(group * G + r % g_size, r / g_size);
}

}  // namespace
}  // namespace llmt::kernels::cuda::flash
