// Kernel lab (llm.c's dev/cuda): every tile shape of the bf16 flash attention kernels
// (src/kernels/cuda/flash_attention_kernels.cuh), for re-measuring the choice src/ makes on new hardware.
// src/kernels/cuda/flash_attention.cu runs the shapes measured fastest on an H100 and has no knobs; here
// the environment picks the shape: LLMT_FLASH_FWD_VARIANT / LLMT_FLASH_BWD_VARIANT = 0..3 (unset: src's
// default), LLMT_FLASH_GROUP = heads per block-order group (unset: src's rule) and LLMT_FLASH_HPB = query
// heads per backward block under grouped-query attention (a divisor of NH/KV; unset: src's rule). Used by
// bench/attention_gpu and by flash_attention_lab_test (the flash test run on every shape).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace llmt::lab {

struct FlashShape {
    int fwd = 0;    // forward variant 0..3: (warps, keys per tile) = (4,64) (4,128) (8,64) (8,128); hs 128: 0, 2
    int bwd = 1;    // backward variant 0..3: (warps, queries per tile) = (4,64) (8,64) (8,32) (4,32); hs 128: 0, 1
    int group = 0;  // heads per group of the block order; 0: src's rule
    int hpb = 0;    // GQA backward: query heads per block (divides NH/KV; NH/KV: no dK/dV atomics); 0: src's rule
};

// The shape the LLMT_FLASH_* variables ask for (src's defaults where unset or out of range).
FlashShape flash_shape_from_env();

// The same contracts as llmt::kernels::cuda::flash_attention_forward/_backward (positions: packed examples),
// on flash_shape_from_env().
void flash_attention_forward(__nv_bfloat16* out, float* lse, const __nv_bfloat16* qkv, int B, int T, int C, int NH,
                             int KV, cudaStream_t s, const int32_t* positions = nullptr);
void flash_attention_backward(__nv_bfloat16* dqkv, const __nv_bfloat16* dout, const __nv_bfloat16* qkv,
                              const __nv_bfloat16* out, const float* lse, int B, int T, int C, int NH, int KV,
                              cudaStream_t s, float* dqkv_colsum = nullptr, const int32_t* positions = nullptr);

}  // namespace llmt::lab
