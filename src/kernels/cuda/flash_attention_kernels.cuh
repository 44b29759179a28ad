// The bf16 flash attention kernels and their launchers, templated on the tile shape (device code and the
// host templates that launch it), included by flash_attention.cu (the default shapes) and by the kernel
// lab bench/kernels/flash_attention_lab.cu (every shape measured). Each includer gets its own copy (the
// kernels are in an unnamed namespace inside flash::).
// The algorithm: FlashAttention-2 (Dao 2023, arXiv:2307.08691, Alg. 1 and 2) written with mma.sync.m16n8k16 (bf16 in, fp32 accumulate), ldmatrix and
// cp.async double buffering, so it runs on Ampere (sm_80) and Hopper (sm_90a) alike.
//  forward : a block owns 16*NW query rows (16 per warp; NW = 4 by default) and streams BC-key K/V tiles
//            (64), last (diagonal) tile first; scores, the online softmax and P stay in registers (the
//            C-fragment of S is reused as the A-fragment of P.V without a shuffle). Tiles entirely above
//            the diagonal are never loaded.
//  backward: a block owns 16*NW keys (16 per warp, NW = 8 by default; K and V held as A-fragments in
//            registers) and walks the query tiles at or below the diagonal: S^T = K Q^T, dP^T = V dO^T,
//            dV += P^T dO, dK += dS^T Q in registers; dS^T goes through shared memory for dQ = dS K,
//            which is added with fp32 atomics into a (B,T,C) scratch and converted to bf16 at the end.
// Grouped-query attention (KV < NH key/value heads, query head h reading kv head h / (NH/KV)): the forward
// only points K/V at the kv head (fwd_kernel<..., true>); a backward block walks the query tiles of several
// query heads of one kv head in turn (bwd_kernel_gqa), so dK/dV sum over them in registers (or, split over
// blocks, in fp32 atomics). Multi-head attention (KV == NH, GPT-2) runs the kernels in the form they had before
// grouped-query heads existed (fwd_kernel<..., false> compiles to the same PTX; bwd_kernel is unchanged).
// Shared-memory rows are padded by 16 bytes so the 8 row addresses of an ldmatrix hit distinct banks.
// Measured speeds and the tile-shape choices: docs/benchmarks.md, "Attention kernel (bf16)".
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/cuda/runtime.h"

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

template <int D, int NW, int BC>
constexpr int fwd_smem_bytes() {
    return (16 * NW + 4 * BC) * (D + 8) * 2;
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

// ---- forward ------------------------------------------------------------------------------------------

// kGqa: grouped-query attention (KV < NH), K/V of kv head h / (NH/KV) in rows of C + 2*KV*D; false: multi-head
// attention, the expressions of the kernel before grouped-query heads existed (the same PTX, so GPT-2's speed).
template <int D, int NW, int BC, bool kGqa>
__global__ void __launch_bounds__(NW * 32)
    fwd_kernel(bf16* __restrict__ out, float* __restrict__ lse, const bf16* __restrict__ qkv, int B, int T, int C,
               int NH, int KV, int G, float scale_log2) {
    constexpr int BR = 16 * NW, LDS = D + 8, NT = NW * 32;
    extern __shared__ __align__(16) unsigned char smem[];
    bf16* sQ = reinterpret_cast<bf16*>(smem);
    bf16* sK = sQ + BR * LDS;       // two buffers of BC x LDS
    bf16* sV = sK + 2 * BC * LDS;   // two buffers of BC x LDS

    const int nq = (T + BR - 1) / BR;
    const int2 order = block_order(nq, B * NH, G);
    const int bh = order.x, b = bh / NH, h = bh % NH;
    const int q0 = (nq - 1 - order.y) * BR;  // the last query tile has the most keys
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
    const int lrow = lane % 8, lmat = lane / 8;  // ldmatrix: this lane addresses row lrow of matrix lmat
    const long C3 = kGqa ? C + 2L * KV * D : 3L * C;  // q (NH heads), k (KV heads), v (KV heads)
    const bf16* base = qkv + static_cast<long>(b) * T * C3 + static_cast<long>(h) * D;
    // K/V rows: kv head h / (NH/KV)'s (GQA); else written as before GQA existed (base + C, base + 2C at each use).
    const bf16* kbase = nullptr;
    const bf16* vbase = nullptr;
    if constexpr (kGqa) {
        kbase = qkv + static_cast<long>(b) * T * C3 + C + static_cast<long>(h / (NH / KV)) * D;
        vbase = kbase + static_cast<long>(KV) * D;
    }
    const int n_kv = (min(q0 + BR, T) + BC - 1) / BC;  // tiles holding keys <= the last valid query

    load_tile<BR, D, NT>(sQ, base, C3, q0, T);
    load_tile<BC, D, NT>(sK, kGqa ? kbase : base + C, C3, (n_kv - 1) * BC, T);
    load_tile<BC, D, NT>(sV, kGqa ? vbase : base + 2 * C, C3, (n_kv - 1) * BC, T);
    cp_async_commit();

    uint32_t qa[D / 16][4];
    float o[D / 8][4];
#pragma unroll
    for (int dn = 0; dn < D / 8; dn++) o[dn][0] = o[dn][1] = o[dn][2] = o[dn][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;  // rows r0 = g and r1 = g + 8 of the warp
    const int r0 = q0 + warp * 16 + g, r1 = r0 + 8;

    for (int it = 0; it < n_kv; it++) {
        const int j = n_kv - 1 - it, buf = it & 1;
        if (it + 1 < n_kv) {  // prefetch the next tile into the other buffer (freed by the last barrier)
            load_tile<BC, D, NT>(sK + (buf ^ 1) * BC * LDS, kGqa ? kbase : base + C, C3, (j - 1) * BC, T);
            load_tile<BC, D, NT>(sV + (buf ^ 1) * BC * LDS, kGqa ? vbase : base + 2 * C, C3, (j - 1) * BC, T);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        if (it == 0) {
#pragma unroll
            for (int ks = 0; ks < D / 16; ks++)
                ldsm_x4(qa[ks], sQ + (warp * 16 + (lmat & 1) * 8 + lrow) * LDS + ks * 16 + (lmat >> 1) * 8);
        }
        // A warp whose rows all precede the tile's first key has nothing to add (BR > BC tiles).
        if (j * BC > q0 + warp * 16 + 15) {
            __syncthreads();
            continue;
        }
        const bf16* k_s = sK + buf * BC * LDS;
        const bf16* v_s = sV + buf * BC * LDS;

        float s[BC / 8][4];
#pragma unroll
        for (int nb = 0; nb < BC / 8; nb++) s[nb][0] = s[nb][1] = s[nb][2] = s[nb][3] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++) {
#pragma unroll
            for (int nb = 0; nb < BC / 8; nb += 2) {
                uint32_t kb[4];
                ldsm_x4(kb, k_s + ((nb + (lmat >> 1)) * 8 + lrow) * LDS + ks * 16 + (lmat & 1) * 8);
                mma16816(s[nb], qa[ks], kb[0], kb[1]);
                mma16816(s[nb + 1], qa[ks], kb[2], kb[3]);
            }
        }

        // Mask keys after the row (only in tiles reaching past the warp's first row). Scores stay unscaled:
        // the scale (> 0) commutes with the max and is folded into the exp2's FFMA below.
        if (j * BC + BC - 1 > q0 + warp * 16) {
#pragma unroll
            for (int nb = 0; nb < BC / 8; nb++) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int key = j * BC + nb * 8 + 2 * tq + (e & 1);
                    if (key > (e < 2 ? r0 : r1)) s[nb][e] = -INFINITY;
                }
            }
        }
        float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
        for (int nb = 0; nb < BC / 8; nb++) {
            mx0 = fmaxf(mx0, fmaxf(s[nb][0], s[nb][1]));
            mx1 = fmaxf(mx1, fmaxf(s[nb][2], s[nb][3]));
        }
        // A row's 8 columns of an n-block sit in the 4 lanes of a quad.
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        const float mn0 = fmaxf(m0, mx0 * scale_log2), mn1 = fmaxf(m1, mx1 * scale_log2);  // log2 units
        const float mu0 = mn0 == -INFINITY ? 0.0f : mn0, mu1 = mn1 == -INFINITY ? 0.0f : mn1;
        const float c0 = fast_exp2(m0 - mu0), c1 = fast_exp2(m1 - mu1);  // 0 while m was -inf
        m0 = mn0;
        m1 = mn1;
        float ps0 = 0.0f, ps1 = 0.0f;
#pragma unroll
        for (int nb = 0; nb < BC / 8; nb++) {
            s[nb][0] = fast_exp2(fmaf(s[nb][0], scale_log2, -mu0));
            s[nb][1] = fast_exp2(fmaf(s[nb][1], scale_log2, -mu0));
            s[nb][2] = fast_exp2(fmaf(s[nb][2], scale_log2, -mu1));
            s[nb][3] = fast_exp2(fmaf(s[nb][3], scale_log2, -mu1));
            ps0 += s[nb][0] + s[nb][1];
            ps1 += s[nb][2] + s[nb][3];
        }
        l0 = l0 * c0 + ps0;  // per-lane partial sums; the quad's lanes are added once at the end
        l1 = l1 * c1 + ps1;
#pragma unroll
        for (int dn = 0; dn < D / 8; dn++) {
            o[dn][0] *= c0;
            o[dn][1] *= c0;
            o[dn][2] *= c1;
            o[dn][3] *= c1;
        }
        // O += P V: P's accumulators become A fragments; V (keys x d) is read transposed as B.
#pragma unroll
        for (int kk = 0; kk < BC / 16; kk++) {
            uint32_t pa[4];
            c_to_a(pa, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
            for (int dn = 0; dn < D / 8; dn += 2) {
                uint32_t vb[4];
                ldsm_x4_t(vb, v_s + (kk * 16 + (lmat & 1) * 8 + lrow) * LDS + (dn + (lmat >> 1)) * 8);
                mma16816(o[dn], pa, vb[0], vb[1]);
                mma16816(o[dn + 1], pa, vb[2], vb[3]);
            }
        }
        __syncthreads();  // this buffer is refilled by the next iteration's prefetch
    }

    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    if (r0 < T) {
        const float inv = 1.0f / l0;
        bf16* op = out + (static_cast<long>(b) * T + r0) * C + h * D + 2 * tq;
#pragma unroll
        for (int dn = 0; dn < D / 8; dn++)
            *reinterpret_cast<uint32_t*>(op + dn * 8) = pack_bf16(o[dn][0] * inv, o[dn][1] * inv);
        if (tq == 0) lse[static_cast<long>(bh) * T + r0] = (m0 + __log2f(l0)) * kLn2;
    }
    if (r1 < T) {
        const float inv = 1.0f / l1;
        bf16* op = out + (static_cast<long>(b) * T + r1) * C + h * D + 2 * tq;
#pragma unroll
        for (int dn = 0; dn < D / 8; dn++)
            *reinterpret_cast<uint32_t*>(op + dn * 8) = pack_bf16(o[dn][2] * inv, o[dn][3] * inv);
        if (tq == 0) lse[static_cast<long>(bh) * T + r1] = (m1 + __log2f(l1)) * kLn2;
    }
}

// ---- backward -----------------------------------------------------------------------------------------

// p[0] += a, p[1] += b (p 8-byte aligned): one vector atomic on Hopper, two scalar ones before.
__device__ __forceinline__ void add2(float* p, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    atomicAdd(reinterpret_cast<float2*>(p), make_float2(a, b));
#else
    atomicAdd(p, a);
    atomicAdd(p + 1, b);
#endif
}

template <int D, int NW, int BQ>
constexpr int bwd_smem_bytes() {
    return (2 * 16 * NW + 4 * BQ) * (D + 8) * 2 + 16 * NW * (BQ + 8) * 2 + 4 * BQ * 4;
}

// dvec[b,h,t] = sum_d dout[b,t,h*D+d] * out[b,t,h*D+d]: one warp per (b, t, h), h fastest. Also zeroes
// the same D entries of the fp32 dq accumulator (B,T,C), saving a separate memset pass.
template <int D>
__global__ void dot_rows_kernel(float* __restrict__ dvec, float* __restrict__ dq, const bf16* __restrict__ dout,
                                const bf16* __restrict__ out, int B, int T, int NH) {
    const long w = (static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (w >= static_cast<long>(B) * T * NH) return;
    const int h = static_cast<int>(w % NH);
    const long bt = w / NH;
    const long off = bt * NH * D + static_cast<long>(h) * D;
    float acc = 0.0f;
#pragma unroll
    for (int d = 2 * lane; d < D; d += 64) {
        const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(dout + off + d));
        const float2 c = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(out + off + d));
        acc += a.x * c.x + a.y * c.y;
        *reinterpret_cast<float2*>(dq + off + d) = make_float2(0.0f, 0.0f);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    const long b = bt / T, t = bt % T;
    if (lane == 0) dvec[(b * NH + h) * T + t] = acc;
}

// dqkv[:, :, 0:C] = bf16(scale * dq_acc), 4 channels per thread (C % 4 == 0); dqkv rows are C3 wide.
__global__ void dq_convert_kernel(bf16* __restrict__ dqkv, const float* __restrict__ dq, long n4, int C, long C3,
                                  float scale) {
    const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n4) return;
    const long e = 4 * i, row = e / C, c = e % C;
    const float4 v = *reinterpret_cast<const float4*>(dq + e);
    uint2 pk;
    pk.x = pack_bf16(v.x * scale, v.y * scale);
    pk.y = pack_bf16(v.z * scale, v.w * scale);
    *reinterpret_cast<uint2*>(dqkv + row * C3 + c) = pk;
}

// dq_convert_kernel, and dcol[c] += scale * the sum over rows of dq[:, c] (the q part of the qkv bias
// gradient). Block (64, 4): x is a 4-column group of the block's 256 columns, y a row lane; a block covers
// rows_per_block rows and adds its sums with one atomic per column.
__global__ void dq_convert_colsum_kernel(bf16* __restrict__ dqkv, float* __restrict__ dcol,
                                         const float* __restrict__ dq, long rows, int C, long C3, int rows_per_block,
                                         float scale) {
    __shared__ float4 part[4][64];
    const int c4 = blockIdx.x * 64 + threadIdx.x;
    const long r0 = static_cast<long>(blockIdx.y) * rows_per_block, r1 = min(rows, r0 + rows_per_block);
    float4 s = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (c4 * 4 < C) {
        for (long r = r0 + threadIdx.y; r < r1; r += 4) {
            const float4 v = *reinterpret_cast<const float4*>(dq + r * C + c4 * 4);
            s.x += v.x;
            s.y += v.y;
            s.z += v.z;
            s.w += v.w;
            uint2 pk;
            pk.x = pack_bf16(v.x * scale, v.y * scale);
            pk.y = pack_bf16(v.z * scale, v.w * scale);
            *reinterpret_cast<uint2*>(dqkv + r * C3 + c4 * 4) = pk;
        }
    }
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && c4 * 4 < C) {
        float4 t = part[0][threadIdx.x];
#pragma unroll
        for (int i = 1; i < 4; i++) {
            t.x += part[i][threadIdx.x].x;
            t.y += part[i][threadIdx.x].y;
            t.z += part[i][threadIdx.x].z;
            t.w += part[i][threadIdx.x].w;
        }
        atomicAdd(dcol + c4 * 4 + 0, t.x * scale);
        atomicAdd(dcol + c4 * 4 + 1, t.y * scale);
        atomicAdd(dcol + c4 * 4 + 2, t.z * scale);
        atomicAdd(dcol + c4 * 4 + 3, t.w * scale);
    }
}

// Multi-head attention (KV == NH): the backward as it was before grouped-query heads existed (bwd_kernel_gqa
// generalises it; this one keeps GPT-2's code and speed). One block per (b, h) and 16*NW keys.
// dcol (3C, optional): += the column sums of this block's dK and dV rows (the k and v parts of the qkv
// bias gradient), summed in the warp, then across warps in shared memory, then one atomic per column.
template <int D, int NW, int BQ>
__global__ void __launch_bounds__(NW * 32)
    bwd_kernel(bf16* __restrict__ dqkv, float* __restrict__ dq_acc, const bf16* __restrict__ dout,
               const bf16* __restrict__ qkv, const float* __restrict__ lse, const float* __restrict__ dvec, int B,
               int T, int C, int NH, int G, float scale_log2, float scale, float* __restrict__ dcol) {
    constexpr int NT = NW * 32, BKV = 16 * NW, LDS = D + 8, LDP = BQ + 8;
    static_assert(NW * 2 * D * 4 <= BKV * LDP * 2, "the column-sum partials reuse sP");
    constexpr int WQ = BQ / 16, WD = NW / WQ, DW = D / WD;  // dQ phase: WQ x WD warps, DW columns each
    static_assert(WQ * WD == NW && DW % 16 == 0, "dQ warp grid");
    extern __shared__ __align__(16) unsigned char smem[];
    bf16* sK = reinterpret_cast<bf16*>(smem);
    bf16* sV = sK + BKV * LDS;
    bf16* sQ = sV + BKV * LDS;       // two buffers of BQ x LDS
    bf16* sO = sQ + 2 * BQ * LDS;    // dO, two buffers
    bf16* sP = sO + 2 * BQ * LDS;    // dS^T, BKV x LDP
    float* sL = reinterpret_cast<float*>(sP + BKV * LDP);  // lse, two buffers of BQ
    float* sD = sL + 2 * BQ;                               // dvec, two buffers of BQ

    const int2 order = block_order((T + BKV - 1) / BKV, B * NH, G);
    const int bh = order.x, b = bh / NH, h = bh % NH;
    const int k0 = order.y * BKV;  // the first key block has the most query tiles
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
    const int lrow = lane % 8, lmat = lane / 8;
    const long C3 = 3L * C;
    const bf16* qb = qkv + static_cast<long>(b) * T * C3 + static_cast<long>(h) * D;  // k at +C, v at +2C
    const bf16* ob = dout + static_cast<long>(b) * T * C + static_cast<long>(h) * D;
    const float* lb = lse + static_cast<long>(bh) * T;
    const float* db = dvec + static_cast<long>(bh) * T;
    const int i0 = k0 / BQ, nq = (T + BQ - 1) / BQ;

    auto load_q = [&](int i, int buf) {
        load_tile<BQ, D, NT>(sQ + buf * BQ * LDS, qb, C3, i * BQ, T);
        load_tile<BQ, D, NT>(sO + buf * BQ * LDS, ob, C, i * BQ, T);
        // Rows past T read lse = D = 0 (and zero q, dO), so P = 1 there but dP = D = 0 and dO = 0: they add
        // nothing to dV, dK or dQ (and are never stored).
        for (int r = threadIdx.x; r < BQ; r += NT) {
            const int q = i * BQ + r;
            cp_async4(sL + buf * BQ + r, lb + (q < T ? q : 0), q < T);
            cp_async4(sD + buf * BQ + r, db + (q < T ? q : 0), q < T);
        }
    };
    load_tile<BKV, D, NT>(sK, qb + C, C3, k0, T);
    load_tile<BKV, D, NT>(sV, qb + 2 * C, C3, k0, T);
    load_q(i0, 0);
    cp_async_commit();

    uint32_t ka[D / 16][4], va[D / 16][4];
    float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
    for (int dn = 0; dn < D / 8; dn++)
#pragma unroll
        for (int e = 0; e < 4; e++) dk[dn][e] = dv[dn][e] = 0.0f;
    const int kr0 = k0 + warp * 16 + g, kr1 = kr0 + 8;  // this lane's two key rows

    for (int i = i0; i < nq; i++) {
        const int buf = (i - i0) & 1;
        if (i + 1 < nq) {
            load_q(i + 1, buf ^ 1);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        if (i == i0) {
#pragma unroll
            for (int ks = 0; ks < D / 16; ks++) {
                const int off = (warp * 16 + (lmat & 1) * 8 + lrow) * LDS + ks * 16 + (lmat >> 1) * 8;
                ldsm_x4(ka[ks], sK + off);
                ldsm_x4(va[ks], sV + off);
            }
        }
        const bf16* q_s = sQ + buf * BQ * LDS;
        const bf16* o_s = sO + buf * BQ * LDS;
        const float* l_s = sL + buf * BQ;
        const float* d_s = sD + buf * BQ;
        const int qbase = i * BQ;
        if (k0 + warp * 16 > qbase + BQ - 1) {
            // Every key of this warp is after every query of the tile: P = 0, only dS^T's rows must be zeroed.
            for (int e = lane; e < 16 * BQ / 2; e += 32)
                *reinterpret_cast<uint32_t*>(sP + (warp * 16 + e / (BQ / 2)) * LDP + 2 * (e % (BQ / 2))) = 0u;
        } else {
            // S^T = K Q^T and dP^T = V dO^T for this warp's 16 keys x BQ queries.
            float st[BQ / 8][4], dp[BQ / 8][4];
#pragma unroll
            for (int nb = 0; nb < BQ / 8; nb++)
#pragma unroll
                for (int e = 0; e < 4; e++) st[nb][e] = dp[nb][e] = 0.0f;
#pragma unroll
            for (int ks = 0; ks < D / 16; ks++) {
#pragma unroll
                for (int nb = 0; nb < BQ / 8; nb += 2) {
                    const int off = ((nb + (lmat >> 1)) * 8 + lrow) * LDS + ks * 16 + (lmat & 1) * 8;
                    uint32_t x[4];
                    ldsm_x4(x, q_s + off);
                    mma16816(st[nb], ka[ks], x[0], x[1]);
                    mma16816(st[nb + 1], ka[ks], x[2], x[3]);
                    ldsm_x4(x, o_s + off);
                    mma16816(dp[nb], va[ks], x[0], x[1]);
                    mma16816(dp[nb + 1], va[ks], x[2], x[3]);
                }
            }
            // P^T = exp(S^T * scale - lse), masked where key > query; dS^T = P^T (dP^T - D).
            const bool need_mask = qbase < k0 + warp * 16 + 16;
#pragma unroll
            for (int nb = 0; nb < BQ / 8; nb++) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int qc = nb * 8 + 2 * tq + (e & 1);
                    float p = fast_exp2(fmaf(st[nb][e], scale_log2, -l_s[qc] * kLog2e));
                    if (need_mask && (e < 2 ? kr0 : kr1) > qbase + qc) p = 0.0f;
                    st[nb][e] = p;
                    dp[nb][e] = p * (dp[nb][e] - d_s[qc]);
                }
            }
            // dV += P^T dO, dK += dS^T Q (dO and Q read transposed as B: k = query, n = head dim).
#pragma unroll
            for (int kk = 0; kk < BQ / 16; kk++) {
                uint32_t pa[4], da[4];
                c_to_a(pa, st[2 * kk], st[2 * kk + 1]);
                c_to_a(da, dp[2 * kk], dp[2 * kk + 1]);
#pragma unroll
                for (int dn = 0; dn < D / 8; dn += 2) {
                    const int off = (kk * 16 + (lmat & 1) * 8 + lrow) * LDS + (dn + (lmat >> 1)) * 8;
                    uint32_t x[4];
                    ldsm_x4_t(x, o_s + off);
                    mma16816(dv[dn], pa, x[0], x[1]);
                    mma16816(dv[dn + 1], pa, x[2], x[3]);
                    ldsm_x4_t(x, q_s + off);
                    mma16816(dk[dn], da, x[0], x[1]);
                    mma16816(dk[dn + 1], da, x[2], x[3]);
                }
            }
            // dS^T (keys x queries) to shared memory for dQ.
#pragma unroll
            for (int nb = 0; nb < BQ / 8; nb++) {
                bf16* row = sP + (warp * 16 + g) * LDP + nb * 8 + 2 * tq;
                *reinterpret_cast<uint32_t*>(row) = pack_bf16(dp[nb][0], dp[nb][1]);
                *reinterpret_cast<uint32_t*>(row + 8 * LDP) = pack_bf16(dp[nb][2], dp[nb][3]);
            }
        }  // warp not fully masked
        __syncthreads();
        // dQ (BQ x D) += dS (BQ x BKV) K (BKV x D): warp (wq, wd) owns rows wq*16.., columns wd*DW..
        {
            const int wq = warp % WQ, wd = warp / WQ;
            float dq[DW / 8][4];
#pragma unroll
            for (int dn = 0; dn < DW / 8; dn++) dq[dn][0] = dq[dn][1] = dq[dn][2] = dq[dn][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < BKV / 16; kk++) {
                uint32_t a[4];  // A[q][key] = dS^T[key][q]: the stored tile read transposed
                ldsm_x4_t(a, sP + (kk * 16 + (lmat >> 1) * 8 + lrow) * LDP + wq * 16 + (lmat & 1) * 8);
#pragma unroll
                for (int dn = 0; dn < DW / 8; dn += 2) {
                    uint32_t x[4];
                    ldsm_x4_t(x, sK + (kk * 16 + (lmat & 1) * 8 + lrow) * LDS + wd * DW + (dn + (lmat >> 1)) * 8);
                    mma16816(dq[dn], a, x[0], x[1]);
                    mma16816(dq[dn + 1], a, x[2], x[3]);
                }
            }
            const int qr0 = qbase + wq * 16 + g, qr1 = qr0 + 8;
            float* dqb = dq_acc + static_cast<long>(b) * T * C + static_cast<long>(h) * D + wd * DW + 2 * tq;
            if (qr0 < T) {
#pragma unroll
                for (int dn = 0; dn < DW / 8; dn++)
                    add2(dqb + static_cast<long>(qr0) * C + dn * 8, dq[dn][0], dq[dn][1]);
            }
            if (qr1 < T) {
#pragma unroll
                for (int dn = 0; dn < DW / 8; dn++)
                    add2(dqb + static_cast<long>(qr1) * C + dn * 8, dq[dn][2], dq[dn][3]);
            }
        }
        __syncthreads();  // sP and this Q/dO buffer are rewritten next iteration
    }

    if (dcol) {
        float* red = reinterpret_cast<float*>(sP);  // NW x 2D floats; sP is free after the loop's last barrier
#pragma unroll
        for (int dn = 0; dn < D / 8; dn++) {
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float sk = (kr0 < T ? dk[dn][e] : 0.0f) + (kr1 < T ? dk[dn][2 + e] : 0.0f);
                float sv = (kr0 < T ? dv[dn][e] : 0.0f) + (kr1 < T ? dv[dn][2 + e] : 0.0f);
#pragma unroll
                for (int o = 4; o < 32; o <<= 1) {  // the 8 lanes of one column (same tq, g = 0..7)
                    sk += __shfl_xor_sync(0xffffffffu, sk, o);
                    sv += __shfl_xor_sync(0xffffffffu, sv, o);
                }
                if (g == 0) {
                    red[warp * 2 * D + dn * 8 + 2 * tq + e] = sk * scale;
                    red[warp * 2 * D + D + dn * 8 + 2 * tq + e] = sv;
                }
            }
        }
        __syncthreads();
        for (int c = threadIdx.x; c < 2 * D; c += NT) {
            float t = 0.0f;
#pragma unroll
            for (int w = 0; w < NW; w++) t += red[w * 2 * D + c];
            atomicAdd(dcol + (c < D ? C : 2 * C - D) + h * D + c, t);
        }
    }

    // dK = scale * dS^T Q, dV = P^T dO, into the k and v columns of dqkv.
    if (kr0 < T) {
        bf16* p = dqkv + (static_cast<long>(b) * T + kr0) * C3 + C + h * D + 2 * tq;
#pragma unroll
        for (int dn = 0; dn < D / 8; dn++) {
            *reinterpret_cast<uint32_t*>(p + dn * 8) = pack_bf16(dk[dn][0] * scale, dk[dn][1] * scale);
            *reinterpret_cast<uint32_t*>(p + C + dn * 8) = pack_bf16(dv[dn][0], dv[dn][1]);
        }
    }
    if (kr1 < T) {
        bf16* p = dqkv + (static_cast<long>(b) * T + kr1) * C3 + C + h * D + 2 * tq;
#pragma unroll
        for (int dn = 0; dn < D / 8; dn++) {
            *reinterpret_cast<uint32_t*>(p + dn * 8) = pack_bf16(dk[dn][2] * scale, dk[dn][3] * scale);
            *reinterpret_cast<uint32_t*>(p + C + dn * 8) = pack_bf16(dv[dn][2], dv[dn][3]);
        }
    }
}

// Grouped-query attention: a block owns 16*NW keys of one kv head g and walks the query tiles of HPB of the
// query heads that read g (h = g*rep + part*HPB + 0..HPB-1, rep = NH/KV, part = which of the rep/HPB slices
// of the group), accumulating dK/dV in registers across those heads (bwd_kernel's loop, run once per head).
// HPB == rep (every head of the group): dK/dV are complete and stored as bf16 into dqkv. HPB < rep:
// several blocks share a kv head, so each adds its dK/dV (fp32, dK already scaled) into dkv_acc (B,T,2*KV*D)
// with atomics and dkv_convert_kernel writes dqkv's k/v columns afterwards.
// dcol (C3, optional): += the column sums of this block's dK and dV rows (the k and v parts of the qkv
// bias gradient), summed in the warp, then across warps in shared memory, then one atomic per column.
template <int D, int NW, int BQ>
__global__ void __launch_bounds__(NW * 32)
    bwd_kernel_gqa(bf16* __restrict__ dqkv, float* __restrict__ dq_acc, float* __restrict__ dkv_acc,
                   const bf16* __restrict__ dout, const bf16* __restrict__ qkv, const float* __restrict__ lse,
                   const float* __restrict__ dvec, int B, int T, int C, int NH, int KV, int HPB, int G,
                   float scale_log2, float scale, float* __restrict__ dcol) {
    constexpr int NT = NW * 32, BKV = 16 * NW, LDS = D + 8, LDP = BQ + 8;
    static_assert(NW * 2 * D * 4 <= BKV * LDP * 2, "the column-sum partials reuse sP");
    constexpr int WQ = BQ / 16, WD = NW / WQ, DW = D / WD;  // dQ phase: WQ x WD warps, DW columns each
    static_assert(WQ * WD == NW && DW % 16 == 0, "dQ warp grid");
    extern __shared__ __align__(16) unsigned char smem[];
    bf16* sK = reinterpret_cast<bf16*>(smem);
    bf16* sV = sK + BKV * LDS;
    bf16* sQ = sV + BKV * LDS;       // two buffers of BQ x LDS
    bf16* sO = sQ + 2 * BQ * LDS;    // dO, two buffers
    bf16* sP = sO + 2 * BQ * LDS;    // dS^T, BKV x LDP
    float* sL = reinterpret_cast<float*>(sP + BKV * LDP);  // lse, two buffers of BQ
    float* sD = sL + 2 * BQ;                               // dvec, two buffers of BQ

    const int rep = NH / KV, nsplit = rep / HPB;
    const int2 order = block_order((T + BKV - 1) / BKV, B * KV * nsplit, G);
    const int unit = order.x, b = unit / (KV * nsplit), kvh = (unit / nsplit) % KV;
    const int h0 = kvh * rep + (unit % nsplit) * HPB;  // this block's first query head
    const int k0 = order.y * BKV;  // the first key block has the most query tiles
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
    const int lrow = lane % 8, lmat = lane / 8;
    const long C3 = C + 2L * KV * D, kvw = static_cast<long>(KV) * D;
    const bf16* xb = qkv + static_cast<long>(b) * T * C3;              // batch row 0 of qkv
    const bf16* kb = xb + C + static_cast<long>(kvh) * D;              // k of head kvh; v at + kvw
    const int i0 = k0 / BQ, nq = (T + BQ - 1) / BQ, n_tiles = nq - i0;

    // Iteration it: query tile i0 + it % n_tiles of head h0 + it / n_tiles.
    auto load_q = [&](int it, int buf) {
        const int h = h0 + it / n_tiles, i = i0 + it % n_tiles;
        const long bh = static_cast<long>(b) * NH + h;
        load_tile<BQ, D, NT>(sQ + buf * BQ * LDS, xb + static_cast<long>(h) * D, C3, i * BQ, T);
        load_tile<BQ, D, NT>(sO + buf * BQ * LDS, dout + static_cast<long>(b) * T * C + static_cast<long>(h) * D, C,
                             i * BQ, T);
        // Rows past T read lse = D = 0 (and zero q, dO), so P = 1 there but dP = D = 0 and dO = 0: they add
        // nothing to dV, dK or dQ (and are never stored).
        for (int r = threadIdx.x; r < BQ; r += NT) {
            const int q = i * BQ + r;
            cp_async4(sL + buf * BQ + r, lse + bh * T + (q < T ? q : 0), q < T);
            cp_async4(sD + buf * BQ + r, dvec + bh * T + (q < T ? q : 0), q < T);
        }
    };
    load_tile<BKV, D, NT>(sK, kb, C3, k0, T);
    load_tile<BKV, D, NT>(sV, kb + kvw, C3, k0, T);
    load_q(0, 0);
    cp_async_commit();

    uint32_t ka[D / 16][4], va[D / 16][4];
    float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
    for (int dn = 0; dn < D / 8; dn++)
#pragma unroll
        for (int e = 0; e < 4; e++) dk[dn][e] = dv[dn][e] = 0.0f;
    const int kr0 = k0 + warp * 16 + g, kr1 = kr0 + 8;  // this lane's two key rows

    const int n_it = HPB * n_tiles;
    for (int it = 0; it < n_it; it++) {
        const int buf = it & 1;
        if (it + 1 < n_it) {
            load_q(it + 1, buf ^ 1);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        if (it == 0) {
#pragma unroll
            for (int ks = 0; ks < D / 16; ks++) {
                const int off = (warp * 16 + (lmat & 1) * 8 + lrow) * LDS + ks * 16 + (lmat >> 1) * 8;
                ldsm_x4(ka[ks], sK + off);
                ldsm_x4(va[ks], sV + off);
            }
        }
        const int h = h0 + it / n_tiles;
        const bf16* q_s = sQ + buf * BQ * LDS;
        const bf16* o_s = sO + buf * BQ * LDS;
        const float* l_s = sL + buf * BQ;
        const float* d_s = sD + buf * BQ;
        const int qbase = (i0 + it % n_tiles) * BQ;
        if (k0 + warp * 16 > qbase + BQ - 1) {
            // Every key of this warp is after every query of the tile: P = 0, only dS^T's rows must be zeroed.
            for (int e = lane; e < 16 * BQ / 2; e += 32)
                *reinterpret_cast<uint32_t*>(sP + (warp * 16 + e / (BQ / 2)) * LDP + 2 * (e % (BQ / 2))) = 0u;
        } else {
            // S^T = K Q^T and dP^T = V dO^T for this warp's 16 keys x BQ queries.
            float st[BQ / 8][4], dp[BQ / 8][4];
#pragma unroll
            for (int nb = 0; nb < BQ / 8; nb++)
#pragma unroll
                for (int e = 0; e < 4; e++) st[nb][e] = dp[nb][e] = 0.0f;
#pragma unroll
            for (int ks = 0; ks < D / 16; ks++) {
#pragma unroll
                for (int nb = 0; nb < BQ / 8; nb += 2) {
                    const int off = ((nb + (lmat >> 1)) * 8 + lrow) * LDS + ks * 16 + (lmat & 1) * 8;
                    uint32_t x[4];
                    ldsm_x4(x, q_s + off);
                    mma16816(st[nb], ka[ks], x[0], x[1]);
                    mma16816(st[nb + 1], ka[ks], x[2], x[3]);
                    ldsm_x4(x, o_s + off);
                    mma16816(dp[nb], va[ks], x[0], x[1]);
                    mma16816(dp[nb + 1], va[ks], x[2], x[3]);
                }
            }
            // P^T = exp(S^T * scale - lse), masked where key > query; dS^T = P^T (dP^T - D).
            const bool need_mask = qbase < k0 + warp * 16 + 16;
#pragma unroll
            for (int nb = 0; nb < BQ / 8; nb++) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int qc = nb * 8 + 2 * tq + (e & 1);
                    float p = fast_exp2(fmaf(st[nb][e], scale_log2, -l_s[qc] * kLog2e));
                    if (need_mask && (e < 2 ? kr0 : kr1) > qbase + qc) p = 0.0f;
                    st[nb][e] = p;
                    dp[nb][e] = p * (dp[nb][e] - d_s[qc]);
                }
            }
            // dV += P^T dO, dK += dS^T Q (dO and Q read transposed as B: k = query, n = head dim).
#pragma unroll
            for (int kk = 0; kk < BQ / 16; kk++) {
                uint32_t pa[4], da[4];
                c_to_a(pa, st[2 * kk], st[2 * kk + 1]);
                c_to_a(da, dp[2 * kk], dp[2 * kk + 1]);
#pragma unroll
                for (int dn = 0; dn < D / 8; dn += 2) {
                    const int off = (kk * 16 + (lmat & 1) * 8 + lrow) * LDS + (dn + (lmat >> 1)) * 8;
                    uint32_t x[4];
                    ldsm_x4_t(x, o_s + off);
                    mma16816(dv[dn], pa, x[0], x[1]);
                    mma16816(dv[dn + 1], pa, x[2], x[3]);
                    ldsm_x4_t(x, q_s + off);
                    mma16816(dk[dn], da, x[0], x[1]);
                    mma16816(dk[dn + 1], da, x[2], x[3]);
                }
            }
            // dS^T (keys x queries) to shared memory for dQ.
#pragma unroll
            for (int nb = 0; nb < BQ / 8; nb++) {
                bf16* row = sP + (warp * 16 + g) * LDP + nb * 8 + 2 * tq;
                *reinterpret_cast<uint32_t*>(row) = pack_bf16(dp[nb][0], dp[nb][1]);
                *reinterpret_cast<uint32_t*>(row + 8 * LDP) = pack_bf16(dp[nb][2], dp[nb][3]);
            }
        }  // warp not fully masked
        __syncthreads();
        // dQ (BQ x D) += dS (BQ x BKV) K (BKV x D): warp (wq, wd) owns rows wq*16.., columns wd*DW..
        {
            const int wq = warp % WQ, wd = warp / WQ;
            float dq[DW / 8][4];
#pragma unroll
            for (int dn = 0; dn < DW / 8; dn++) dq[dn][0] = dq[dn][1] = dq[dn][2] = dq[dn][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < BKV / 16; kk++) {
                uint32_t a[4];  // A[q][key] = dS^T[key][q]: the stored tile read transposed
                ldsm_x4_t(a, sP + (kk * 16 + (lmat >> 1) * 8 + lrow) * LDP + wq * 16 + (lmat & 1) * 8);
#pragma unroll
                for (int dn = 0; dn < DW / 8; dn += 2) {
                    uint32_t x[4];
                    ldsm_x4_t(x, sK + (kk * 16 + (lmat & 1) * 8 + lrow) * LDS + wd * DW + (dn + (lmat >> 1)) * 8);
                    mma16816(dq[dn], a, x[0], x[1]);
                    mma16816(dq[dn + 1], a, x[2], x[3]);
                }
            }
            const int qr0 = qbase + wq * 16 + g, qr1 = qr0 + 8;
            float* dqb = dq_acc + static_cast<long>(b) * T * C + static_cast<long>(h) * D + wd * DW + 2 * tq;
            if (qr0 < T) {
#pragma unroll
                for (int dn = 0; dn < DW / 8; dn++)
                    add2(dqb + static_cast<long>(qr0) * C + dn * 8, dq[dn][0], dq[dn][1]);
            }
            if (qr1 < T) {
#pragma unroll
                for (int dn = 0; dn < DW / 8; dn++)
                    add2(dqb + static_cast<long>(qr1) * C + dn * 8, dq[dn][2], dq[dn][3]);
            }
        }
        __syncthreads();  // sP and this Q/dO buffer are rewritten next iteration
    }

    if (dcol) {
        float* red = reinterpret_cast<float*>(sP);  // NW x 2D floats; sP is free after the loop's last barrier
#pragma unroll
        for (int dn = 0; dn < D / 8; dn++) {
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float sk = (kr0 < T ? dk[dn][e] : 0.0f) + (kr1 < T ? dk[dn][2 + e] : 0.0f);
                float sv = (kr0 < T ? dv[dn][e] : 0.0f) + (kr1 < T ? dv[dn][2 + e] : 0.0f);
#pragma unroll
                for (int o = 4; o < 32; o <<= 1) {  // the 8 lanes of one column (same tq, g = 0..7)
                    sk += __shfl_xor_sync(0xffffffffu, sk, o);
                    sv += __shfl_xor_sync(0xffffffffu, sv, o);
                }
                if (g == 0) {
                    red[warp * 2 * D + dn * 8 + 2 * tq + e] = sk * scale;
                    red[warp * 2 * D + D + dn * 8 + 2 * tq + e] = sv;
                }
            }
        }
        __syncthreads();
        for (int c = threadIdx.x; c < 2 * D; c += NT) {
            float t = 0.0f;
#pragma unroll
            for (int w = 0; w < NW; w++) t += red[w * 2 * D + c];
            // k columns C + kvh*D.., v columns C + KV*D + kvh*D..
            atomicAdd(dcol + C + (c < D ? 0 : kvw - D) + static_cast<long>(kvh) * D + c, t);
        }
    }

    if (dkv_acc) {  // a share of the group's heads: add into the fp32 accumulator (B,T,2*KV*D)
        const long W = 2 * kvw;
        float* pa = dkv_acc + static_cast<long>(b) * T * W + static_cast<long>(kvh) * D + 2 * tq;
        if (kr0 < T) {
#pragma unroll
            for (int dn = 0; dn < D / 8; dn++) {
                add2(pa + kr0 * W + dn * 8, dk[dn][0] * scale, dk[dn][1] * scale);
                add2(pa + kr0 * W + kvw + dn * 8, dv[dn][0], dv[dn][1]);
            }
        }
        if (kr1 < T) {
#pragma unroll
            for (int dn = 0; dn < D / 8; dn++) {
                add2(pa + kr1 * W + dn * 8, dk[dn][2] * scale, dk[dn][3] * scale);
                add2(pa + kr1 * W + kvw + dn * 8, dv[dn][2], dv[dn][3]);
            }
        }
        return;
    }
    // dK = scale * dS^T Q, dV = P^T dO, into the k and v columns of dqkv.
    if (kr0 < T) {
        bf16* p = dqkv + (static_cast<long>(b) * T + kr0) * C3 + C + static_cast<long>(kvh) * D + 2 * tq;
#pragma unroll
        for (int dn = 0; dn < D / 8; dn++) {
            *reinterpret_cast<uint32_t*>(p + dn * 8) = pack_bf16(dk[dn][0] * scale, dk[dn][1] * scale);
            *reinterpret_cast<uint32_t*>(p + kvw + dn * 8) = pack_bf16(dv[dn][0], dv[dn][1]);
        }
    }
    if (kr1 < T) {
        bf16* p = dqkv + (static_cast<long>(b) * T + kr1) * C3 + C + static_cast<long>(kvh) * D + 2 * tq;
#pragma unroll
        for (int dn = 0; dn < D / 8; dn++) {
            *reinterpret_cast<uint32_t*>(p + dn * 8) = pack_bf16(dk[dn][2] * scale, dk[dn][3] * scale);
            *reinterpret_cast<uint32_t*>(p + kvw + dn * 8) = pack_bf16(dv[dn][2], dv[dn][3]);
        }
    }
}

// dqkv[:, :, C : C + 2*KV*D] = bf16(dkv_acc) (B*T rows of W = 2*KV*D floats), 4 channels per thread.
__global__ void dkv_convert_kernel(bf16* __restrict__ dqkv, const float* __restrict__ acc, long n4, int C, int W) {
    const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n4) return;
    const long e = 4 * i, row = e / W, c = e % W;
    const float4 v = *reinterpret_cast<const float4*>(acc + e);
    uint2 pk;
    pk.x = pack_bf16(v.x, v.y);
    pk.y = pack_bf16(v.z, v.w);
    *reinterpret_cast<uint2*>(dqkv + row * (static_cast<long>(C) + W) + C + c) = pk;
}

// ---- host side ----------------------------------------------------------------------------------------

int check_args(const char* fn, const void* const* ptrs, int nptrs, int B, int T, int C, int NH, int KV) {
    if (B < 1 || T < 1 || C < 1 || NH < 1 || KV < 1 || C % NH != 0 || NH % KV != 0)
        throw InternalError(std::string(fn) + ": bad shape B=" + std::to_string(B) + " T=" + std::to_string(T) +
                         " C=" + std::to_string(C) + " NH=" + std::to_string(NH) + " KV=" + std::to_string(KV) +
                         " (expected positive sizes with C divisible by NH and NH by KV)");
    if (static_cast<long>(B) * NH * ((T + 15) / 16) > 0x7fffffffL)
        throw InternalError(std::string(fn) + ": B*NH*T = " + std::to_string(static_cast<long>(B) * NH * T) +
                         " is too large for one launch (expected B*NH*ceil(T/16) < 2^31)");
    const int hs = C / NH;
    if (hs != 64 && hs != 128)
        throw InternalError(std::string(fn) + ": head size C/NH = " + std::to_string(hs) +
                         " is not supported (expected 64 or 128)");
    for (int i = 0; i < nptrs; i++)
        if (reinterpret_cast<uintptr_t>(ptrs[i]) % 16 != 0)
            throw InternalError(std::string(fn) + ": argument " + std::to_string(i) +
                             " is not 16-byte aligned (device buffers from cudaMalloc/Arena are)");
    return hs;
}

// Grow-only scratch per device: the fp32 dq accumulator (B,T,C), dvec (B,NH,T) and, for grouped-query
// attention split over several blocks per kv head, the fp32 dK/dV accumulator (B,T,2*KV*HS). Reallocated only
// when a larger shape arrives, so steady-state training (and CUDA graph capture after a warm-up step)
// allocates nothing. Backward calls on one device must not run concurrently (they share it).
struct Scratch {
    float* dq = nullptr;
    size_t dq_n = 0;
    float* dvec = nullptr;
    size_t dvec_n = 0;
    float* dkv = nullptr;
    size_t dkv_n = 0;
};

float* grow(float*& p, size_t& cap, size_t n) {
    if (n > cap) {
        if (p) {
            LLMT_CUDA_CHECK(cudaDeviceSynchronize());  // earlier kernels may still read the old buffer
            LLMT_CUDA_CHECK(cudaFree(p));
            p = nullptr;
            cap = 0;
        }
        LLMT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(float)));
        cap = n;
    }
    return p;
}

Scratch& scratch() {
    static std::mutex mu;
    static std::vector<Scratch> per_device;
    int dev = 0;
    LLMT_CUDA_CHECK(cudaGetDevice(&dev));
    std::lock_guard<std::mutex> lock(mu);
    if (static_cast<int>(per_device.size()) <= dev) per_device.resize(dev + 1);
    return per_device[dev];
}

// Heads per group of the block order (block_order). Measured on an H100 (docs/benchmarks.md): at 192 and
// 384 heads (GPT-2, B=16/32) groups of 32 were best (one group of all 384 made the forward 24% slower); at
// 48 heads one group was best (the grid is a few waves, so heaviest-first balance matters more, and all
// heads' K/V fit in L2 anyway). The kernel lab (bench/kernels) passes other group sizes to the launchers.
inline int default_group_heads(int n_heads) { return n_heads <= 64 ? n_heads : 32; }

inline int clamp_group(int g, int n_heads) { return g < 1 ? 1 : (g > n_heads ? n_heads : g); }

template <int D, int NW, int BC>
void launch_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH, int KV, cudaStream_t s,
                    int group) {
    constexpr int BR = 16 * NW;
    constexpr int smem = fwd_smem_bytes<D, NW, BC>();
    const float scale_log2 = kLog2e / sqrtf(static_cast<float>(D));
    const unsigned grid = static_cast<unsigned>(B) * NH * ((T + BR - 1) / BR);
    auto launch = [&](auto kernel) {
        LLMT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        kernel<<<grid, NW * 32, smem, s>>>(out, lse, qkv, B, T, C, NH, KV, clamp_group(group, B * NH), scale_log2);
        LLMT_CUDA_CHECK_LAUNCH("flash_attention_forward");
    };
    if (KV == NH) launch(fwd_kernel<D, NW, BC, false>);
    else launch(fwd_kernel<D, NW, BC, true>);
}

// Query heads per backward block for grouped-query attention (bwd_kernel): all rep = NH/KV heads of a kv
// head (no dK/dV atomics) unless that leaves fewer than 1.5 blocks per SM, then the largest divisor of rep
// that gives 1.5, else 1 (one block per query head, as multi-head attention; dK/dV through fp32 atomics).
// A backward block of the default shapes holds one SM (registers), and the heaviest (first) key blocks carry
// hpb times a query head's work, so too few, too long blocks leave SMs idle at the end of the grid. Measured
// on an H100 (132 SMs) at Llama-3.2-1B's shape, T 2048, 32 query heads on 8 kv heads (docs/benchmarks.md):
// at B=1, 2 heads per block (256 blocks) 0.256 ms, 1 head 0.265 ms, all 4 (128 blocks) 0.426 ms; at B=4,
// all 4 (512 blocks) 0.929 ms, 2 heads 0.965 ms, 1 head 1.000 ms.
inline int default_heads_per_block(int B, int NH, int KV, int key_blocks) {
    const int rep = NH / KV;
    if (rep == 1) return 1;
    int dev = 0, sms = 132;
    if (cudaGetDevice(&dev) == cudaSuccess) cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    for (int hpb = rep; hpb > 1; hpb--)
        if (rep % hpb == 0 && 2L * B * (NH / hpb) * key_blocks >= 3L * sms) return hpb;
    return 1;
}

// group: units (batch, kv head, slice) per block-order group (<= 0: default_group_heads of the unit count);
// hpb: query heads per block (a divisor of NH/KV; <= 0: default_heads_per_block).
template <int D, int NW, int BQ>
void launch_backward(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* out, const float* lse, int B, int T,
                     int C, int NH, int KV, cudaStream_t s, float* dcol, int group, int hpb = 0) {
    constexpr int BKV = 16 * NW;
    const int rep = NH / KV, key_blocks = (T + BKV - 1) / BKV;
    if (hpb <= 0 || rep % hpb != 0) hpb = default_heads_per_block(B, NH, KV, key_blocks);
    Scratch& sc = scratch();
    const long C3 = C + 2L * KV * D;
    const size_t n_dq = static_cast<size_t>(B) * T * C, n_rows = static_cast<size_t>(B) * NH * T;
    float* dq = grow(sc.dq, sc.dq_n, n_dq);
    float* dvec = grow(sc.dvec, sc.dvec_n, n_rows);
    float* dkv = nullptr;
    const size_t n_dkv = static_cast<size_t>(B) * T * 2 * KV * D;
    if (hpb < rep) {
        dkv = grow(sc.dkv, sc.dkv_n, n_dkv);
        LLMT_CUDA_CHECK(cudaMemsetAsync(dkv, 0, n_dkv * sizeof(float), s));
    }
    const long warps = static_cast<long>(B) * T * NH;
    dot_rows_kernel<D><<<static_cast<unsigned>((warps + 7) / 8), 256, 0, s>>>(dvec, dq, dout, out, B, T, NH);
    LLMT_CUDA_CHECK_LAUNCH("flash_attention_backward/dot_rows");

    constexpr int smem = bwd_smem_bytes<D, NW, BQ>();
    const float scale = 1.0f / sqrtf(static_cast<float>(D));
    const int units = B * KV * (rep / hpb);  // (batch, kv head, slice of its query heads); B*NH for MHA
    const unsigned grid = static_cast<unsigned>(units) * key_blocks;
    const int G = group > 0 ? clamp_group(group, units) : default_group_heads(units);
    if (rep == 1) {  // multi-head attention: the kernel GPT-2 has always run
        LLMT_CUDA_CHECK(
            cudaFuncSetAttribute(bwd_kernel<D, NW, BQ>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        bwd_kernel<D, NW, BQ><<<grid, NW * 32, smem, s>>>(dqkv, dq, dout, qkv, lse, dvec, B, T, C, NH, G,
                                                          scale * kLog2e, scale, dcol);
    } else {
        LLMT_CUDA_CHECK(
            cudaFuncSetAttribute(bwd_kernel_gqa<D, NW, BQ>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        bwd_kernel_gqa<D, NW, BQ><<<grid, NW * 32, smem, s>>>(dqkv, dq, dkv, dout, qkv, lse, dvec, B, T, C, NH, KV,
                                                              hpb, G, scale * kLog2e, scale, dcol);
    }
    LLMT_CUDA_CHECK_LAUNCH("flash_attention_backward");
    if (dkv) {
        const long n4 = static_cast<long>(n_dkv / 4);
        dkv_convert_kernel<<<static_cast<unsigned>((n4 + 255) / 256), 256, 0, s>>>(dqkv, dkv, n4, C, 2 * KV * D);
        LLMT_CUDA_CHECK_LAUNCH("flash_attention_backward/dkv_convert");
    }

    if (dcol) {
        constexpr int kRowsPerBlock = 64;
        const long rows = static_cast<long>(B) * T;
        const dim3 cgrid(static_cast<unsigned>((C / 4 + 63) / 64), static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock));
        dq_convert_colsum_kernel<<<cgrid, dim3(64, 4), 0, s>>>(dqkv, dcol, dq, rows, C, C3, kRowsPerBlock, scale);
        LLMT_CUDA_CHECK_LAUNCH("flash_attention_backward/dq_convert_colsum");
        return;
    }
    const long n4 = static_cast<long>(n_dq / 4);
    dq_convert_kernel<<<static_cast<unsigned>((n4 + 255) / 256), 256, 0, s>>>(dqkv, dq, n4, C, C3, scale);
    LLMT_CUDA_CHECK_LAUNCH("flash_attention_backward/dq_convert");
}

}  // namespace
}  // namespace llmt::kernels::cuda::flash
