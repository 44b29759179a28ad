// The flash attention forward kernel (flash_attention_kernels.cuh has the algorithm and the launcher).
#pragma once

#include "kernels/cuda/flash_common.cuh"

namespace llmt::kernels::cuda::flash {
namespace {

template <int D, int NW, int BC>
constexpr int fwd_smem_bytes() {
    return (16 * NW + 4 * BC) * (D + 8) * 2;
}

// ---- forward ------------------------------------------------------------------------------------------

// kGqa: grouped-query attention (KV < NH), K/V of kv head h / (NH/KV) in rows of C + 2*KV*D; false: multi-head
// attention, with no head mapping in the code (GPT-2's kernel and speed: bench/kernels/ptx_compare.py).
// kPacked: bounded rows, packed examples (positions (B,T), nullable) and/or a sliding window (> 0); row r attends
// keys lo(r) .. r, lo = first_key (key_bounds.cuh: r - positions[b,r], and > r - window). The block walks the tiles
// from the diagonal down to the one holding lo(q0), its first row's bound (the smallest: lo never decreases along
// a row), so a window of W keys costs O(W) tiles per block; a warp skips tiles wholly before its rows' bounds and
// masks keys below them in the tiles that reach past the smallest. A row whose keys all lie in other tiles sees
// only -inf scores in this one: its running max stays -inf (or keeps its value) and it adds 0 (the mu guard below).
// kPacked false: no bound code (the same PTX but for the unused parameters).
template <int D, int NW, int BC, bool kGqa, bool kPacked>
__global__ void __launch_bounds__(NW * 32)
    fwd_kernel(bf16* __restrict__ out, float* __restrict__ lse, const bf16* __restrict__ qkv, int B, int T, int C,
               int NH, int KV, int G, float scale_log2, const int32_t* __restrict__ positions, int window) {
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
    // K/V rows: kv head h / (NH/KV)'s (GQA); else base + C and base + 2C, computed at each use.
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
    // Packed: the first keys lo0, lo1 of rows r0, r1 (a row past T: its own index, so it lowers no minimum), their
    // minimum and maximum over the warp, and the first tile of the block. Plain causal: 0, and every tile.
    int lo0 = 0, lo1 = 0, wlo_min = 0, wlo_max = 0, n_it = n_kv;
    if constexpr (kPacked) {
        const int32_t* pb = positions ? positions + static_cast<long>(b) * T : nullptr;
        lo0 = r0 < T ? first_key(pb, r0, window) : r0;
        lo1 = r1 < T ? first_key(pb, r1, window) : r1;
        wlo_min = min(lo0, lo1);
        wlo_max = max(lo0, lo1);
#pragma unroll
        for (int step = 4; step < 32; step <<= 1) {  // lanes of the same tq hold the warp's 16 rows
            wlo_min = min(wlo_min, __shfl_xor_sync(0xffffffffu, wlo_min, step));
            wlo_max = max(wlo_max, __shfl_xor_sync(0xffffffffu, wlo_max, step));
        }
        n_it = max(1, n_kv - max(0, first_key(pb, q0, window)) / BC);  // tiles n_kv-1 down to lo(q0)'s
    }

    for (int it = 0; it < n_it; it++) {
        const int j = n_kv - 1 - it, buf = it & 1;
        if (it + 1 < n_it) {  // prefetch the next tile into the other buffer (freed by the last barrier)
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
        // A warp whose rows all precede the tile's first key has nothing to add (BR > BC tiles); packed, nor one
        // whose rows' examples all start after the tile's last key.
        if (j * BC > q0 + warp * 16 + 15 || (kPacked && j * BC + BC - 1 < wlo_min)) {
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
        // Bounded: mask keys before the row's first key (only in tiles starting before the warp's largest bound).
        if (kPacked && j * BC < wlo_max) {
#pragma unroll
            for (int nb = 0; nb < BC / 8; nb++) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int key = j * BC + nb * 8 + 2 * tq + (e & 1);
                    if (key < (e < 2 ? lo0 : lo1)) s[nb][e] = -INFINITY;
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

}  // namespace
}  // namespace llmt::kernels::cuda::flash
