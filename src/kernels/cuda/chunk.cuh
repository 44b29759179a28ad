// V consecutive elements of a kernel's storage type moved as one access (.cu only): one 16-byte load or
// store where V * sizeof(T) == 16 (8 bf16 or 4 fp32; the pointer must then be 16-byte aligned), V element
// accesses otherwise. The element-wise kernels that take 16 bytes per thread where a row allows (rope.cu,
// swiglu.cu).
#pragma once

#include <cuda_runtime.h>

namespace llmt::kernels::cuda {

template <typename T, int V>
struct alignas(V * sizeof(T) == 16 ? 16 : alignof(T)) Chunk {
    T e[V];
};

template <typename T, int V>
__device__ __forceinline__ Chunk<T, V> load_chunk(const T* p) {
    Chunk<T, V> c;
    if constexpr (V * sizeof(T) == 16) {
        *reinterpret_cast<uint4*>(c.e) = *reinterpret_cast<const uint4*>(p);
    } else {
#pragma unroll
        for (int q = 0; q < V; q++) c.e[q] = p[q];
    }
    return c;
}

template <typename T, int V>
__device__ __forceinline__ void store_chunk(T* p, const Chunk<T, V>& c) {
    if constexpr (V * sizeof(T) == 16) {
        *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(c.e);
    } else {
#pragma unroll
        for (int q = 0; q < V; q++) p[q] = c.e[q];
    }
}

}  // namespace llmt::kernels::cuda
