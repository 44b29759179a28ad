// The flash attention backward kernel for grouped-query heads (flash_attention_kernels.cuh has the algorithm
// and the launcher; flash_backward.cuh the multi-head kernel it generalises).
#pragma once

#include "kernels/cuda/flash_backward_tile.cuh"
#include "kernels/cuda/flash_common.cuh"

namespace llmt::kernels::cuda::flash {
namespace {

// Grouped-query attention: a block owns 16*NW keys of one kv head g and walks the query tiles of HPB of the
// query heads that read g (h = g*rep + part*HPB + 0..HPB-1, rep = NH/KV, part = which of the rep/HPB slices
// of the group), accumulating dK/dV in registers across those heads (bwd_kernel's loop, run once per head).
// HPB == rep (every head of the group): dK/dV are complete and stored as bf16 into dqkv. HPB < rep:
// several blocks share a kv head, so each adds its dK/dV (fp32, dK already scaled) into dkv_acc (B,T,2*KV*D)
// with atomics and dkv_convert_kernel writes dqkv's k/v columns afterwards.
// dcol (C3, optional): += the column sums of this block's dK and dV rows (the k and v parts of the qkv
// bias gradient), summed in the warp, then across warps in shared memory, then one atomic per column.
// kPacked: bounded rows, as bwd_kernel's (flash_backward.cuh): each head's walk ends at packed_query_end.
template <int D, int NW, int BQ, bool kPacked>
__global__ void __launch_bounds__(NW * 32)
    bwd_kernel_gqa(bf16* __restrict__ dqkv, float* __restrict__ dq_acc, float* __restrict__ dkv_acc,
                   const bf16* __restrict__ dout, const bf16* __restrict__ qkv, const float* __restrict__ lse,
                   const float* __restrict__ dvec, int B, int T, int C, int NH, int KV, int HPB, int G,
                   float scale_log2, float scale, float* __restrict__ dcol, const int32_t* __restrict__ positions,
                   int window) {
    constexpr int NT = NW * 32, BKV = 16 * NW, LDS = D + 8;
    extern __shared__ __align__(16) unsigned char smem[];
    const BwdBuffers m = bwd_buffers<D, NW, BQ>(smem);

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
    const int i0 = k0 / BQ, nq = (T + BQ - 1) / BQ;
    const int32_t* pb = kPacked && positions ? positions + static_cast<long>(b) * T : nullptr;  // this row's
    int i_end = nq;  // one past the last query tile that can attend this block's keys
    if constexpr (kPacked) i_end = packed_query_end(pb, i0, nq, BQ, min(k0 + BKV, T) - 1, window);
    const int n_tiles = i_end - i0;

    // Iteration it: query tile i0 + it % n_tiles of head h0 + it / n_tiles.
    auto load_q = [&](int it, int buf) {
        const int h = h0 + it / n_tiles, i = i0 + it % n_tiles;
        const long bh = static_cast<long>(b) * NH + h;
        load_tile<BQ, D, NT>(m.sQ + buf * BQ * LDS, xb + static_cast<long>(h) * D, C3, i * BQ, T);
        load_tile<BQ, D, NT>(m.sO + buf * BQ * LDS, dout + static_cast<long>(b) * T * C + static_cast<long>(h) * D, C,
                             i * BQ, T);
        // Rows past T read lse = D = 0 (and zero q, dO), so P = 1 there but dP = D = 0 and dO = 0: they add
        // nothing to dV, dK or dQ (and are never stored).
        for (int r = threadIdx.x; r < BQ; r += NT) {
            const int q = i * BQ + r;
            cp_async4(m.sL + buf * BQ + r, lse + bh * T + (q < T ? q : 0), q < T);
            cp_async4(m.sD + buf * BQ + r, dvec + bh * T + (q < T ? q : 0), q < T);
            if constexpr (kPacked)
                if (pb) cp_async4(m.sPos + buf * BQ + r, pb + (q < T ? q : 0), q < T);
        }
    };
    load_tile<BKV, D, NT>(m.sK, kb, C3, k0, T);
    load_tile<BKV, D, NT>(m.sV, kb + kvw, C3, k0, T);
    load_q(0, 0);
    cp_async_commit();

    BwdFragments<D> ka, va;  // this warp's keys and values as mma A fragments
    BwdRows<D> dk, dv;        // this lane's dK and dV accumulators (rows kr0, kr1)
    bwd_zero<D>(dk, dv);
    const int kr0 = k0 + warp * 16 + g, kr1 = kr0 + 8;  // this lane's two key rows
    const BwdLane lp{warp, lane, g, tq, lrow, lmat, kr0, kr1};
    const BwdSmem sm = bwd_smem(m, pb != nullptr);

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
        if (it == 0) bwd_kv_fragments<D>(m.sK, m.sV, lp, ka, va);
        const int h = h0 + it / n_tiles;
        const int qbase = (i0 + it % n_tiles) * BQ;
        bwd_query_tile<D, NW, BQ, kPacked>(sm, buf, qbase, k0, b, h, T, C, scale_log2, lp, ka, va, dk, dv, dq_acc,
                                           window);
        __syncthreads();  // sP and this Q/dO buffer are rewritten next iteration
    }

    // The partials reuse sP, free after the loop's last barrier; k columns C + kvh*D.., v C + KV*D + kvh*D..
    if (dcol)
        bwd_column_sums<D, NW>(reinterpret_cast<float*>(m.sP), dk, dv, lp, T, scale, [&](int c) {
            return dcol + C + (c < D ? 0 : kvw - D) + static_cast<long>(kvh) * D + c;
        });

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
    if (kr0 < T)
        bwd_store_row<D>(dqkv + (static_cast<long>(b) * T + kr0) * C3 + C + static_cast<long>(kvh) * D + 2 * tq, kvw,
                         dk, dv, 0, scale);
    if (kr1 < T)
        bwd_store_row<D>(dqkv + (static_cast<long>(b) * T + kr1) * C3 + C + static_cast<long>(kvh) * D + 2 * tq, kvw,
                         dk, dv, 2, scale);
}

}  // namespace
}  // namespace llmt::kernels::cuda::flash
