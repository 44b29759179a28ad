// The per-device state of a backward that writes per-block partial sums and adds them in a second kernel: a
// grow-only fp32 buffer for the partials and the device's SM count. Every backward on a device runs on stream(),
// in order, so one buffer per device serves them all; it is reallocated only when a larger request arrives (the
// first step of a run), so steady-state training allocates nothing. In an unnamed namespace: each including .cu
// file has its own buffers (cuda/head_rmsnorm.cu, and the RMSNorm backward's cuda/rmsnorm_backward_kernels.cuh).
#pragma once

#include <cstddef>
#include <deque>
#include <mutex>

#include "kernels/cuda/runtime.h"

namespace llmt::kernels::cuda {
namespace {

struct PartialScratch {
    float* partial = nullptr;
    size_t cap = 0;  // floats
    int sms = 0;
};

// This file's state for the current device.
inline PartialScratch& partial_scratch() {
    static std::mutex mu;
    static std::deque<PartialScratch> per_device;  // growing a deque keeps references to its elements valid
    int dev = 0;
    LLMT_CUDA_CHECK(cudaGetDevice(&dev));
    std::lock_guard<std::mutex> lock(mu);
    if (static_cast<int>(per_device.size()) <= dev) per_device.resize(dev + 1);
    PartialScratch& sc = per_device[dev];
    if (sc.sms == 0) LLMT_CUDA_CHECK(cudaDeviceGetAttribute(&sc.sms, cudaDevAttrMultiProcessorCount, dev));
    return sc;
}

// At least n floats of partials.
inline float* partial_buffer(PartialScratch& sc, size_t n) {
    if (n > sc.cap) {
        if (sc.partial) {
            LLMT_CUDA_CHECK(cudaDeviceSynchronize());  // earlier launches may still read the old buffer
            LLMT_CUDA_CHECK(cudaFree(sc.partial));
            sc.partial = nullptr;
            sc.cap = 0;
        }
        LLMT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&sc.partial), n * sizeof(float)));
        sc.cap = n;
    }
    return sc.partial;
}

}  // namespace
}  // namespace llmt::kernels::cuda
