// The flash attention backward: its helper kernels (D = rowsum(dO * O), the dQ conversions, the dK/dV
// conversion) and the multi-head kernel (flash_attention_kernels.cuh has the algorithm and the launcher).
#pragma once

#include "kernels/cuda/flash_backward_tile.cuh"
#include "kernels/cuda/flash_common.cuh"

namespace llmt::kernels::cuda::flash {
namespace {

// ---- backward -----------------------------------------------------------------------------------------

// kPacked adds two buffers of BQ query positions.
template <int D, int NW, int BQ, bool kPacked = false>
constexpr int bwd_smem_bytes() {
    return (2 * 16 * NW + 4 * BQ) * (D + 8) * 2 + 16 * NW * (BQ + 8) * 2 + 4 * BQ * 4 + (kPacked ? 2 * BQ * 4 : 0);
}

// Bounded rows: the end of the query tiles (after i0) that can attend keys <= k_last: the first tile whose
// first row's first key (first_key: its example's start, its window's) is after k_last, else nq. Exact because
// a row's first key never decreases. Each warp finds it alone (one ballot per 32 tiles, no barrier), so
// every warp of the block loops to the same bound.
__device__ __forceinline__ int packed_query_end(const int32_t* pb, int i0, int nq, int BQ, int k_last, int window) {
    const int lane = threadIdx.x % 32;
    for (int base = i0 + 1; base < nq; base += 32) {
        const int i = base + lane;
        const unsigned past = __ballot_sync(0xffffffffu, i < nq && first_key(pb, i * BQ, window) > k_last);
        if (past) return base + __ffs(static_cast<int>(past)) - 1;
    }
    return nq;
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

// Multi-head attention (KV == NH): the backward without a head mapping (bwd_kernel_gqa generalises it;
// this one keeps GPT-2's code and speed). One block per (b, h) and 16*NW keys.
// kPacked: packed examples, positions (B,T); query t attends keys lo(t) = t - positions[b,t] .. t. The block
// walks the query tiles from its diagonal up to packed_query_end (the later ones start their examples after
// its last key); per tile, a warp whose 16 keys all precede the tile's smallest bound (its first row's) only
// zeroes its dS^T rows, and P is masked where the key is before the query's bound (in tiles whose largest
// bound, their last row's, passes the warp's first key). kPacked false: no bound code (the same PTX but for
// the unused parameters and one comparison with its operands swapped).
// dcol (3C, optional): += the column sums of this block's dK and dV rows (the k and v parts of the qkv
// bias gradient), summed in the warp, then across warps in shared memory, then one atomic per column.
template <int D, int NW, int BQ, bool kPacked>
__global__ void __launch_bounds__(NW * 32)
    bwd_kernel(bf16* __restrict__ dqkv, float* __restrict__ dq_acc, const bf16* __restrict__ dout,
               const bf16* __restrict__ qkv, const float* __restrict__ lse, const float* __restrict__ dvec, int B,
               int T, int C, int NH, int G, float scale_log2, float scale, float* __restrict__ dcol,
               const int32_t* __restrict__ positions, int window) {
    constexpr int NT = NW * 32, BKV = 16 * NW, LDS = D + 8;
    extern __shared__ __align__(16) unsigned char smem[];
    const BwdBuffers m = bwd_buffers<D, NW, BQ>(smem);

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
    const int32_t* pb = kPacked && positions ? positions + static_cast<long>(b) * T : nullptr;  // this row's
    int i_end = nq;  // one past the last query tile that can attend this block's keys
    if constexpr (kPacked) i_end = packed_query_end(pb, i0, nq, BQ, min(k0 + BKV, T) - 1, window);

    auto load_q = [&](int i, int buf) {
        load_tile<BQ, D, NT>(m.sQ + buf * BQ * LDS, qb, C3, i * BQ, T);
        load_tile<BQ, D, NT>(m.sO + buf * BQ * LDS, ob, C, i * BQ, T);
        // Rows past T read lse = D = 0 (and zero q, dO), so P = 1 there but dP = D = 0 and dO = 0: they add
        // nothing to dV, dK or dQ (and are never stored).
        for (int r = threadIdx.x; r < BQ; r += NT) {
            const int q = i * BQ + r;
            cp_async4(m.sL + buf * BQ + r, lb + (q < T ? q : 0), q < T);
            cp_async4(m.sD + buf * BQ + r, db + (q < T ? q : 0), q < T);
            if constexpr (kPacked)
                if (pb) cp_async4(m.sPos + buf * BQ + r, pb + (q < T ? q : 0), q < T);
        }
    };
    load_tile<BKV, D, NT>(m.sK, qb + C, C3, k0, T);
    load_tile<BKV, D, NT>(m.sV, qb + 2 * C, C3, k0, T);
    load_q(i0, 0);
    cp_async_commit();

    BwdFragments<D> ka, va;  // this warp's keys and values as mma A fragments
    BwdRows<D> dk, dv;        // this lane's dK and dV accumulators (rows kr0, kr1)
    bwd_zero<D>(dk, dv);
    const int kr0 = k0 + warp * 16 + g, kr1 = kr0 + 8;  // this lane's two key rows
    const BwdLane lp{warp, lane, g, tq, lrow, lmat, kr0, kr1};
    const BwdSmem sm = bwd_smem(m, pb != nullptr);

    for (int i = i0; i < i_end; i++) {
        const int buf = (i - i0) & 1;
        if (i + 1 < i_end) {
            load_q(i + 1, buf ^ 1);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        if (i == i0) bwd_kv_fragments<D>(m.sK, m.sV, lp, ka, va);
        const int qbase = i * BQ;
        bwd_query_tile<D, NW, BQ, kPacked>(sm, buf, qbase, k0, b, h, T, C, scale_log2, lp, ka, va, dk, dv, dq_acc,
                                           window);
        __syncthreads();  // sP and this Q/dO buffer are rewritten next iteration
    }

    if (dcol)  // the partials reuse sP, free after the loop's last barrier
        bwd_column_sums<D, NW>(reinterpret_cast<float*>(m.sP), dk, dv, lp, T, scale,
                               [&](int c) { return dcol + (c < D ? C : 2 * C - D) + h * D + c; });

    // dK = scale * dS^T Q, dV = P^T dO, into the k and v columns of dqkv.
    if (lp.kr0 < T)
        bwd_store_row<D>(dqkv + (static_cast<long>(b) * T + lp.kr0) * C3 + C + h * D + 2 * lp.tq, C, dk, dv, 0, scale);
    if (lp.kr1 < T)
        bwd_store_row<D>(dqkv + (static_cast<long>(b) * T + lp.kr1) * C3 + C + h * D + 2 * lp.tq, C, dk, dv, 2, scale);
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

}  // namespace
}  // namespace llmt::kernels::cuda::flash
