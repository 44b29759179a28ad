// bf16 tensor-core causal attention (cuda/flash_attention.h), FlashAttention-2's algorithm (Dao 2023,
// arXiv:2307.08691, Alg. 1 and 2) written with mma.sync.m16n8k16 (bf16 in, fp32 accumulate), ldmatrix and
// cp.async double buffering, so it runs on Ampere (sm_80) and Hopper (sm_90a) alike.
//  forward : a block owns 16*NW query rows (16 per warp; NW = 4 by default) and streams BC-key K/V tiles
//            (64), last (diagonal) tile first; scores, the online softmax and P stay in registers (the
//            C-fragment of S is reused as the A-fragment of P.V without a shuffle). Tiles entirely above
//            the diagonal are never loaded.
//  backward: a block owns 16*NW keys (16 per warp, NW = 8 by default; K and V held as A-fragments in
//            registers) and walks the query tiles at or below the diagonal: S^T = K Q^T, dP^T = V dO^T,
//            dV += P^T dO, dK += dS^T Q in registers; dS^T goes through shared memory for dQ = dS K,
//            which is added with fp32 atomics into a (B,T,C) scratch and converted to bf16 at the end.
// Shared-memory rows are padded by 16 bytes so the 8 row addresses of an ldmatrix hit distinct banks.
// Measured speeds and the tile-shape choices: docs/benchmarks.md, "Attention kernel (bf16)".
#include "kernels/cuda/flash_attention.h"

#include "kernels/cuda/flash_attention_kernels.cuh"

namespace llmt::kernels::cuda {

using flash::bf16;

// The tile shapes below measured fastest on an H100 (docs/benchmarks.md, "Attention kernel (bf16)");
// bench/kernels/flash_attention_lab.cu keeps the others for re-measuring on new hardware.
void flash_attention_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH, int KV,
                             cudaStream_t s, const int32_t* positions, int window) {
    const void* ptrs[] = {out, lse, qkv};
    const int hs = flash::check_args("flash_attention_forward", ptrs, 3, B, T, C, NH, KV);
    const int group = flash::default_group_heads(B * NH);
    // (warps per block = 16-row slices of queries, keys per K/V tile)
    if (hs == 64) flash::launch_forward<64, 4, 64>(out, lse, qkv, B, T, C, NH, KV, s, group, positions, window);
    else flash::launch_forward<128, 4, 64>(out, lse, qkv, B, T, C, NH, KV, s, group, positions, window);
}

void flash_attention_backward(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* out, const float* lse, int B,
                              int T, int C, int NH, int KV, cudaStream_t s, float* dqkv_colsum,
                              const int32_t* positions, int window) {
    const void* ptrs[] = {dqkv, dout, qkv, out, lse};
    const int hs = flash::check_args("flash_attention_backward", ptrs, 5, B, T, C, NH, KV);
    // (warps per block = 16-key slices, queries per tile). hs 128 takes 32-query tiles so that the K, V, dK
    // and dV fragments (4 x 64 registers) still fit. Block-order groups and query heads per block: the
    // defaults (flash_attention_kernels.cuh, launch_backward).
    if (hs == 64)
        flash::launch_backward<64, 8, 64>(dqkv, dout, qkv, out, lse, B, T, C, NH, KV, s, dqkv_colsum, 0, 0, positions,
                                          window);
    else
        flash::launch_backward<128, 8, 32>(dqkv, dout, qkv, out, lse, B, T, C, NH, KV, s, dqkv_colsum, 0, 0, positions,
                                          window);
}

}  // namespace llmt::kernels::cuda
