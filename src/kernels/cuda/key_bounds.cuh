// The first key a query row attends, shared by the CUDA attention kernels (attention.cu and the flash kernels):
// ops.h's packed examples (query t attends from t - positions[t], the start of its example) and sliding window
// (query t attends keys j > t - window), each optional. Both bounds never decrease along t, so neither does their
// maximum: the kernels rely on that to end their key and query loops early.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace llmt::kernels::cuda {

// pos_row: the batch row's positions (T) or null (no packed examples); window: > 0, or 0 for none. Returns a key
// index <= t; it may be negative (a window reaching before the sequence), callers clamp it at 0 where they index.
__device__ __forceinline__ int first_key(const int32_t* pos_row, int t, int window) {
    const int lo = pos_row ? t - pos_row[t] : 0;
    return window > 0 ? max(lo, t - window + 1) : lo;
}

}  // namespace llmt::kernels::cuda
