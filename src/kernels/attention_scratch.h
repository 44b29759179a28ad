// Device memory the causal attention's backward takes outside the model's arenas, for the memory plan: on
// CUDA an fp32 dQ accumulator of B*T*C (cuDNN's fused engine and our flash kernels both keep one), the flash
// kernels' fp32 row dot products dO.O (B*NH*T) and, when a block handles only some of a KV head's query
// heads, their fp32 dK|dV accumulator (B*T*2*KV*HS). The CPU kernels keep nothing beyond the arenas.
// (cuda/cudnn_attention.cpp and cuda/flash_attention_kernels.cuh grow these buffers; cuDNN's own workspace,
// a few MiB, is not counted.)
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/tensor.h"  // Device

namespace llmt::kernels {

inline size_t attention_backward_scratch_bytes(Device device, int64_t B, int64_t T, int64_t C, int64_t NH,
                                               int64_t KV, int64_t HS) {
    if (device != Device::kCuda) return 0;
    const int64_t floats = B * T * C + B * NH * T + B * T * 2 * KV * HS;
    return static_cast<size_t>(floats) * sizeof(float);
}

}  // namespace llmt::kernels
