// Validation and dispatch helpers of the kernels/ops*.cpp files (internal to src/kernels: models include
// ops.h): argument checks that throw InternalError naming the op and argument, typed data pointers, and
// the CUDA dispatch macros. Moved from ops.cpp unchanged (inline, in ops_check instead of an unnamed
// namespace).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "core/build_info.h"
#include "core/check.h"
#include "core/knobs.h"
#include "core/tensor.h"

#if LLMT_CUDA_ENABLED
#include "kernels/cuda/attention.h"
#include "kernels/cuda/classifier.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/encoder.h"
#include "kernels/cuda/head_rmsnorm.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/optim.h"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/swiglu.h"
#if __has_include("kernels/cuda/flash_attention.h") && LLMT_HAVE_FLASH_ATTENTION
#include "kernels/cuda/flash_attention.h"
#define LLMT_FLASH_ATTENTION 1
#else
#define LLMT_FLASH_ATTENTION 0
#endif
#if LLMT_HAVE_CUDNN_ATTENTION
#include "kernels/cuda/cudnn_attention.h"
#define LLMT_CUDNN_ATTENTION 1
#else
#define LLMT_CUDNN_ATTENTION 0
#endif
// `return cuda::op(...)` when the tensors are on the GPU (check_device refused them in a CPU-only build).
#define LLMT_ON_CUDA(dev, call) \
    if ((dev) == Device::kCuda) return cuda::call
// The same for ops with fp32 or bf16 storage: `body` sees the element type as T (float or __nv_bfloat16)
// and p<E>(tensor) as the typed pointer.
#define LLMT_ON_CUDA_T(dev, dt, body)                                                   \
    if ((dev) == Device::kCuda)                                                         \
    return on_dtype(dt, [&](auto* tag_) {                                               \
        using E = std::remove_pointer_t<decltype(tag_)>;                                \
        return body;                                                                    \
    })
#else
#define LLMT_ON_CUDA(dev, call) (void)(dev)
#define LLMT_ON_CUDA_T(dev, dt, body) ((void)(dev), (void)(dt))
#endif

namespace llmt::kernels::ops_check {

struct Arg {
    const char* name;
    const Tensor& t;
};

// All present tensors on one device; returns it. CUDA tensors throw in a build without CUDA.
inline Device check_device(const char* op, std::initializer_list<Arg> args) {
    bool first = true;
    Device dev = Device::kCpu;
    for (const Arg& a : args) {
        if (a.t.empty()) continue;
        if (first) {
            dev = a.t.device;
            first = false;
        }
        LLMT_INTERNAL_CHECK(a.t.device == dev, "{}: argument '{}' is on {} but the others are on {}", op, a.name,
                   device_name(a.t.device), device_name(dev));
    }
    if (dev == Device::kCuda && !LLMT_CUDA_ENABLED) throw DeviceError(fmt::format("{}: built without CUDA", op));
    return dev;
}

inline void check_present(const char* op, const char* name, const Tensor& t) {
    LLMT_INTERNAL_CHECK(!t.empty(), "{}: argument '{}' is missing (null data)", op, name);
}

inline void check_dtype(const char* op, const char* name, const Tensor& t, DType dt) {
    LLMT_INTERNAL_CHECK(t.dtype == dt, "{}: argument '{}' must be {}, got {}", op, name, dtype_name(dt),
               t.describe());
}

// Checks ndim and every extent that is >= 0 in `want` (-1: any).
inline void check_shape(const char* op, const char* name, const Tensor& t, std::initializer_list<int64_t> want) {
    check_present(op, name, t);
    bool ok = t.ndim == static_cast<int>(want.size());
    int i = 0;
    for (int64_t w : want) {
        if (ok && w >= 0 && t.dim(i) != w) ok = false;
        ++i;
    }
    if (!ok) {
        std::string s = "(";
        i = 0;
        for (int64_t w : want) s += (i++ ? ", " : "") + (w >= 0 ? std::to_string(w) : std::string("*"));
        s += ")";
        throw InternalError(fmt::format("{}: argument '{}' must have shape {}, got {}", op,
                                        name, s, t.describe()));
    }
}

inline void check_f32(const char* op, std::initializer_list<Arg> args) {
    for (const Arg& a : args)
        if (!a.t.empty()) check_dtype(op, a.name, a.t, DType::kF32);
}

inline int as_int(const char* op, const char* what, int64_t v) {
    LLMT_INTERNAL_CHECK(v >= 0 && v <= INT32_MAX, "{}: {} = {} out of range", op, what, v);
    return static_cast<int>(v);
}

inline float* f(const Tensor& t) { return static_cast<float*>(t.data); }
inline const int32_t* ids(const Tensor& t) { return static_cast<const int32_t*>(t.data); }
template <typename T>
inline T* p(const Tensor& t) {
    return static_cast<T*>(t.data);
}

// The storage type of an op's activations and weights: every listed (present) tensor f32, or every one
// bf16, which only the CUDA backend implements (mixed precision: statistics, losses and parameter
// gradients stay f32 and are checked with check_f32).
inline DType check_act(const char* op, Device dev, std::initializer_list<Arg> args) {
    DType dt = DType::kF32;
    for (const Arg& a : args)
        if (!a.t.empty()) {
            dt = a.t.dtype;
            break;
        }
    LLMT_INTERNAL_CHECK(dt == DType::kF32 || dt == DType::kBF16, "{}: tensors must be f32 or bf16, got {}", op,
               dtype_name(dt));
    for (const Arg& a : args)
        if (!a.t.empty()) check_dtype(op, a.name, a.t, dt);
    LLMT_INTERNAL_CHECK(dt == DType::kF32 || dev == Device::kCuda,
                        "{}: bf16 tensors are supported on CUDA only, got {}", op, device_name(dev));
    return dt;
}

// Present, the same element count everywhere; returns the common storage type (f32, or bf16 on CUDA).
inline DType check_same_numel(const char* op, std::initializer_list<Arg> args) {
    const Tensor& first = args.begin()->t;
    for (const Arg& a : args) {
        check_present(op, a.name, a.t);
        LLMT_INTERNAL_CHECK(a.t.numel() == first.numel(), "{}: argument '{}' has {} elements, expected {} ({})", op,
                            a.name, a.t.numel(), first.numel(), args.begin()->name);
    }
    return check_act(op, first.device, args);
}

// dst (cols) += column sums of x (rows, cols): the CPU side of the ops that also return the bias gradient
// of the linear layer whose output gradient they produce.
inline void add_column_sums_cpu(float* dst, const float* x, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) dst[c] += x[r * cols + c];
}

#if LLMT_CUDA_ENABLED
template <typename Fn>
inline auto on_dtype(DType dt, Fn&& fn) {
    if (dt == DType::kBF16) return fn(static_cast<__nv_bfloat16*>(nullptr));
    return fn(static_cast<float*>(nullptr));
}

// dst (cols) += column sums of x (rows, cols, stored as dt) on CUDA: the unfused path of the ops that also
// return a bias gradient.
inline void add_column_sums_cuda(const char* op, float* dst, DType dt, const Tensor& x, int64_t rows,
                                 const char* cols_name, int64_t cols) {
    on_dtype(dt, [&](auto* tag_) {
        using E = std::remove_pointer_t<decltype(tag_)>;
        cuda::add_column_sums(dst, p<E>(x), as_int(op, "rows", rows), as_int(op, cols_name, cols), cuda::stream());
    });
}

// cuBLASLt's GELU epilogues for bf16 (LLMTRAIN_GELU_FUSION=0 runs the separate GELU kernels instead).
inline bool gelu_fusion() { return knob_on(Knob::kGeluFusion); }

#if LLMT_FLASH_ATTENTION
// The tensor-core kernels (flash_attention.h) for bf16 head sizes they implement (LLMTRAIN_FLASH_ATTENTION=0
// selects the simple kernels, for comparisons).
inline bool use_flash_attention(int64_t HS) { return knob_on(Knob::kFlashAttention) && (HS == 64 || HS == 128); }
#endif
#if LLMT_CUDNN_ATTENTION
// cuDNN's fused attention (cuda/cudnn_attention.h) for bf16 unless LLMTRAIN_CUDNN_ATTENTION=0: 1.4-1.6x our
// flash kernels on an H100 (docs/benchmarks.md). It declines (returns false) without libcudnn or for shapes
// it cannot plan, and the flash kernels run instead.
inline bool use_cudnn_attention() { return knob_on(Knob::kCudnnAttention); }
#endif
#endif


}  // namespace llmt::kernels::ops_check
