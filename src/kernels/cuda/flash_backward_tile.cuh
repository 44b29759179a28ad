// One query tile's part of the flash attention backward, shared by the multi-head kernel (bwd_kernel,
// flash_backward.cuh) and the grouped-query one (bwd_kernel_gqa, flash_backward_gqa.cuh): with the block's
// 16*NW keys and values in registers (ka, va) and shared memory (sK), and the tile's Q, dO, lse, D (and,
// packed, positions) in shared-memory buffer `buf`, it adds the tile's terms to this lane's dK and dV
// accumulators and its dQ rows (fp32 atomics into dq_acc for query head h). With it, the other parts both
// kernels share: the shared-memory carve, the fragment loads, the column sums and the bf16 dK/dV rows.
// Inlined into both kernels, whose PTX it leaves as it was (bench/kernels/ptx_compare.py).
#pragma once

#include "kernels/cuda/flash_common.cuh"

namespace llmt::kernels::cuda::flash {
namespace {

// p[0] += a, p[1] += b (p 8-byte aligned): one vector atomic on Hopper, two scalar ones before.
__device__ __forceinline__ void add2(float* p, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    atomicAdd(reinterpret_cast<float2*>(p), make_float2(a, b));
#else
    atomicAdd(p, a);
    atomicAdd(p + 1, b);
#endif
}

// A lane's place in the block: warp, lane, the mma fragment's group g and quad position tq, the ldmatrix
// row and matrix, and the two key rows (kr0, kr1 = kr0 + 8) whose dK/dV it accumulates.
struct BwdLane {
    int warp, lane, g, tq, lrow, lmat, kr0, kr1;
};

// The shared-memory buffers of the backward kernels (their layout: flash_backward.cuh's bwd_kernel).
struct BwdSmem {
    const bf16* sK;
    const bf16* sQ;
    const bf16* sO;
    bf16* sP;
    const float* sL;
    const float* sD;
    const int* sPos;  // positions (two buffers of BQ), or null without packed examples
};

// A warp's 16 rows of head dimension D as mma A fragments, and a lane's share of 16 rows x D fp32 accumulators.
template <int D>
using BwdFragments = uint32_t[D / 16][4];
template <int D>
using BwdRows = float[D / 8][4];

// The shared-memory carve of the backward kernels: K and V (16*NW rows each), Q and dO (two buffers of BQ rows
// each), dS^T (16*NW x BQ, whose rows the column sums reuse), lse and dvec (two buffers of BQ floats each) and,
// packed, positions (two buffers of BQ ints).
struct BwdBuffers {
    bf16* sK;
    bf16* sV;
    bf16* sQ;
    bf16* sO;
    bf16* sP;
    float* sL;
    float* sD;
    int* sPos;
};

template <int D, int NW, int BQ>
__device__ __forceinline__ BwdBuffers bwd_buffers(unsigned char* smem) {
    constexpr int BKV = 16 * NW, LDS = D + 8, LDP = BQ + 8;
    static_assert(NW * 2 * D * 4 <= BKV * LDP * 2, "the column-sum partials reuse sP");
    BwdBuffers m;
    m.sK = reinterpret_cast<bf16*>(smem);
    m.sV = m.sK + BKV * LDS;
    m.sQ = m.sV + BKV * LDS;
    m.sO = m.sQ + 2 * BQ * LDS;
    m.sP = m.sO + 2 * BQ * LDS;
    m.sL = reinterpret_cast<float*>(m.sP + BKV * LDP);
    m.sD = m.sL + 2 * BQ;
    m.sPos = reinterpret_cast<int*>(m.sD + 2 * BQ);
    return m;
}

// The buffers the query-tile step reads (positions only with packed examples).
__device__ __forceinline__ BwdSmem bwd_smem(const BwdBuffers& m, bool packed) {
    return {m.sK, m.sQ, m.sO, m.sP, m.sL, m.sD, packed ? m.sPos : nullptr};
}

// dK = dV = 0.
template <int D>
__device__ __forceinline__ void bwd_zero(float (&dk)[D / 8][4], float (&dv)[D / 8][4]) {
#pragma unroll
    for (int dn = 0; dn < D / 8; dn++)
#pragma unroll
        for (int e = 0; e < 4; e++) dk[dn][e] = dv[dn][e] = 0.0f;
}

// This warp's 16 keys and values as mma A fragments, from shared memory (once, after the first tile's wait).
template <int D>
__device__ __forceinline__ void bwd_kv_fragments(const bf16* sK, const bf16* sV, const BwdLane& l,
                                                 uint32_t (&ka)[D / 16][4], uint32_t (&va)[D / 16][4]) {
    constexpr int LDS = D + 8;
#pragma unroll
    for (int ks = 0; ks < D / 16; ks++) {
        const int off = (l.warp * 16 + (l.lmat & 1) * 8 + l.lrow) * LDS + ks * 16 + (l.lmat >> 1) * 8;
        ldsm_x4(ka[ks], sK + off);
        ldsm_x4(va[ks], sV + off);
    }
}

// The column sums of this block's dK (times scale) and dV rows below T: summed over the 8 lanes of a column,
// then across the NW warps in `red` (NW x 2D floats, shared), then one atomic per column at column(c), the
// address of column c = 0..2D-1 (k columns first).
template <int D, int NW, class Column>
__device__ __forceinline__ void bwd_column_sums(float* red, const float (&dk)[D / 8][4], const float (&dv)[D / 8][4],
                                                const BwdLane& l, int T, float scale, Column column) {
    const int kr0 = l.kr0, kr1 = l.kr1;
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
            if (l.g == 0) {
                red[l.warp * 2 * D + dn * 8 + 2 * l.tq + e] = sk * scale;
                red[l.warp * 2 * D + D + dn * 8 + 2 * l.tq + e] = sv;
            }
        }
    }
    __syncthreads();
    for (int c = threadIdx.x; c < 2 * D; c += NW * 32) {
        float t = 0.0f;
#pragma unroll
        for (int w = 0; w < NW; w++) t += red[w * 2 * D + c];
        atomicAdd(column(c), t);
    }
}

// One key row's dK (times scale) and dV as bf16: row half e0 (0: the lane's kr0, 2: its kr1) at p, dV at p + voff.
template <int D, class Off>
__device__ __forceinline__ void bwd_store_row(bf16* p, Off voff, const float (&dk)[D / 8][4],
                                              const float (&dv)[D / 8][4], int e0, float scale) {
#pragma unroll
    for (int dn = 0; dn < D / 8; dn++) {
        *reinterpret_cast<uint32_t*>(p + dn * 8) = pack_bf16(dk[dn][e0] * scale, dk[dn][e0 + 1] * scale);
        *reinterpret_cast<uint32_t*>(p + voff + dn * 8) = pack_bf16(dv[dn][e0], dv[dn][e0 + 1]);
    }
}

// Query tile qbase..qbase+BQ-1 (buffer buf) against keys k0..k0+16*NW-1 of query head h, batch row b.
template <int D, int NW, int BQ, bool kPacked>
__device__ __forceinline__ void bwd_query_tile(const BwdSmem& s, int buf, int qbase, int k0, int b, int h, int T,
                                               int C, float scale_log2, const BwdLane& l,
                                               const uint32_t (&ka)[D / 16][4], const uint32_t (&va)[D / 16][4],
                                               float (&dk)[D / 8][4], float (&dv)[D / 8][4],
                                               float* __restrict__ dq_acc, int window) {
    constexpr int BKV = 16 * NW, LDS = D + 8, LDP = BQ + 8;
    constexpr int WQ = BQ / 16, WD = NW / WQ, DW = D / WD;  // dQ phase: WQ x WD warps, DW columns each
    static_assert(WQ * WD == NW && DW % 16 == 0, "dQ warp grid");
    const int warp = l.warp, lane = l.lane, g = l.g, tq = l.tq, lrow = l.lrow, lmat = l.lmat;
    const int kr0 = l.kr0, kr1 = l.kr1;
    const bf16* sK = s.sK;
    bf16* sP = s.sP;
    const bf16* q_s = s.sQ + buf * BQ * LDS;
    const bf16* o_s = s.sO + buf * BQ * LDS;
    const float* l_s = s.sL + buf * BQ;
    const float* d_s = s.sD + buf * BQ;
    const int* p_s = s.sPos ? s.sPos + buf * BQ : nullptr;
    // Bounded rows: query qbase + qc's first key (first_key on the positions in shared memory).
    auto lo_of = [&](int qc) {
        const int q = qbase + qc, lo = p_s ? q - p_s[qc] : 0;
        return window > 0 ? max(lo, q - window + 1) : lo;
    };
    int tile_lo_min = 0, tile_lo_max = 0;  // bounded: the bounds of the tile's first and last valid rows
    if constexpr (kPacked) {
        const int last = min(BQ, T - qbase) - 1;
        tile_lo_min = lo_of(0);
        tile_lo_max = lo_of(last);
    }
    if (k0 + warp * 16 > qbase + BQ - 1 || (kPacked && k0 + warp * 16 + 15 < tile_lo_min)) {
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
        // P^T = exp(S^T * scale - lse), masked where key > query (and, bounded, where the key is before the
        // query's first key); dS^T = P^T (dP^T - D).
        const bool need_mask = qbase < k0 + warp * 16 + 16;
        const bool need_lo_mask = kPacked && k0 + warp * 16 < tile_lo_max;
#pragma unroll
        for (int nb = 0; nb < BQ / 8; nb++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int qc = nb * 8 + 2 * tq + (e & 1);
                float p = fast_exp2(fmaf(st[nb][e], scale_log2, -l_s[qc] * kLog2e));
                if (need_mask && (e < 2 ? kr0 : kr1) > qbase + qc) p = 0.0f;
                if (need_lo_mask && (e < 2 ? kr0 : kr1) < lo_of(qc)) p = 0.0f;
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
}

}  // namespace
}  // namespace llmt::kernels::cuda::flash
