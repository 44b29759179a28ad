// The bf16 flash attention kernels and their launchers, templated on the tile shape (device code and the
// host templates that launch it), included by flash_attention.cu (the default shapes) and by the kernel
// lab bench/kernels/flash_attention_lab.cu (every shape measured). Each includer gets its own copy (the
// kernels are in an unnamed namespace inside flash::).
// The algorithm: FlashAttention-2 (Dao 2023, arXiv:2307.08691, Alg. 1 and 2) written with mma.sync.m16n8k16 (bf16 in,
// fp32 accumulate), ldmatrix and cp.async double buffering, so it runs on Ampere (sm_80) and Hopper (sm_90a) alike.
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
// Packed examples (positions, ops.h): every kernel has a kPacked flag; with it a query row attends keys from the
// start of its example only, the forward visits only the key tiles from the diagonal down to its block's first
// bound and the backward only the query tiles up to packed_query_end (flash_forward.cuh, flash_backward.cuh).
// A sliding window (window > 0) is one more such bound (key_bounds.cuh's first_key: the larger of the example's start
// and t - window + 1) and takes the same kPacked path, so tiles outside every row's window are never visited.
// kPacked false compiles to no bound code (the same PTX but for the unused parameters and, in the backward, one
// comparison with its operands swapped: bench/kernels/ptx_compare.py, docs/benchmarks.md).
// Shared-memory rows are padded by 16 bytes so the 8 row addresses of an ldmatrix hit distinct banks.
// Measured speeds and the tile-shape choices: docs/benchmarks.md, "Attention kernel (bf16)".
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "kernels/cuda/flash_backward.cuh"
#include "kernels/cuda/flash_backward_gqa.cuh"
#include "kernels/cuda/flash_common.cuh"
#include "kernels/cuda/flash_forward.cuh"
#include "kernels/cuda/runtime.h"

namespace llmt::kernels::cuda::flash {
namespace {

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

// positions (B,T) device i32 or null: packed examples; window > 0: a sliding window, 0 none (either makes
// fwd_kernel's rows bounded, kPacked).
template <int D, int NW, int BC>
void launch_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH, int KV, cudaStream_t s,
                    int group, const int32_t* positions = nullptr, int window = 0) {
    constexpr int BR = 16 * NW;
    constexpr int smem = fwd_smem_bytes<D, NW, BC>();
    const float scale_log2 = kLog2e / sqrtf(static_cast<float>(D));
    const unsigned grid = static_cast<unsigned>(B) * NH * ((T + BR - 1) / BR);
    auto launch = [&](auto kernel) {
        LLMT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        kernel<<<grid, NW * 32, smem, s>>>(out, lse, qkv, B, T, C, NH, KV, clamp_group(group, B * NH), scale_log2,
                                           positions, window);
        LLMT_CUDA_CHECK_LAUNCH("flash_attention_forward");
    };
    if (positions || window > 0) {
        if (KV == NH) launch(fwd_kernel<D, NW, BC, false, true>);
        else launch(fwd_kernel<D, NW, BC, true, true>);
    } else {
        if (KV == NH) launch(fwd_kernel<D, NW, BC, false, false>);
        else launch(fwd_kernel<D, NW, BC, true, false>);
    }
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
// hpb: query heads per block (a divisor of NH/KV; <= 0: default_heads_per_block); positions (B,T) device i32 or
// null: packed examples; window > 0: a sliding window (either: the kernels' kPacked, bounded rows).
template <int D, int NW, int BQ>
void launch_backward(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* out, const float* lse, int B, int T,
                     int C, int NH, int KV, cudaStream_t s, float* dcol, int group, int hpb = 0,
                     const int32_t* positions = nullptr, int window = 0) {
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

    const float scale = 1.0f / sqrtf(static_cast<float>(D));
    const int units = B * KV * (rep / hpb);  // (batch, kv head, slice of its query heads); B*NH for MHA
    const unsigned grid = static_cast<unsigned>(units) * key_blocks;
    const int G = group > 0 ? clamp_group(group, units) : default_group_heads(units);
    auto launch = [&](auto packed) {
        constexpr bool kPacked = decltype(packed)::value;
        constexpr int smem = bwd_smem_bytes<D, NW, BQ, kPacked>();
        if (rep == 1) {  // multi-head attention: the kernel GPT-2 has always run
            LLMT_CUDA_CHECK(cudaFuncSetAttribute(bwd_kernel<D, NW, BQ, kPacked>,
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
            bwd_kernel<D, NW, BQ, kPacked><<<grid, NW * 32, smem, s>>>(dqkv, dq, dout, qkv, lse, dvec, B, T, C, NH, G,
                                                                       scale * kLog2e, scale, dcol, positions,
                                                                       window);
        } else {
            LLMT_CUDA_CHECK(cudaFuncSetAttribute(bwd_kernel_gqa<D, NW, BQ, kPacked>,
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
            bwd_kernel_gqa<D, NW, BQ, kPacked><<<grid, NW * 32, smem, s>>>(dqkv, dq, dkv, dout, qkv, lse, dvec, B, T,
                                                                           C, NH, KV, hpb, G, scale * kLog2e, scale,
                                                                           dcol, positions, window);
        }
        LLMT_CUDA_CHECK_LAUNCH("flash_attention_backward");
    };
    if (positions || window > 0) launch(std::true_type{});
    else launch(std::false_type{});
    if (dkv) {
        const long n4 = static_cast<long>(n_dkv / 4);
        dkv_convert_kernel<<<static_cast<unsigned>((n4 + 255) / 256), 256, 0, s>>>(dqkv, dkv, n4, C, 2 * KV * D);
        LLMT_CUDA_CHECK_LAUNCH("flash_attention_backward/dkv_convert");
    }

    if (dcol) {
        constexpr int kRowsPerBlock = 64;
        const long rows = static_cast<long>(B) * T;
        const dim3 cgrid(static_cast<unsigned>((C / 4 + 63) / 64),
                         static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock));
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
