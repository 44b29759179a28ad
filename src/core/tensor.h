// Tensor: a non-owning, contiguous (row-major) view of up to 4 dimensions: data pointer, shape, dtype,
// device (docs/design.md §1). Memory is owned by an Arena (core/arena.h) or by the caller.
// Thread safety: a plain value type; concurrent reads are safe, writes to the data are the caller's.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/check.h"
#include "core/dtype.h"

namespace llmt {

enum class Device : uint8_t { kCpu, kCuda };

constexpr std::string_view device_name(Device d) { return d == Device::kCpu ? "cpu" : "cuda"; }

struct Tensor {
    static constexpr int kMaxDims = 4;

    void* data = nullptr;
    std::array<int64_t, kMaxDims> shape{};  // unused trailing dims are 0
    int ndim = 0;
    DType dtype = DType::kF32;
    Device device = Device::kCpu;

    Tensor() = default;
    // Throws InputError when more than 4 dims or a negative extent is given.
    Tensor(void* data_, std::initializer_list<int64_t> dims, DType dt = DType::kF32,
           Device dev = Device::kCpu)
        : data(data_), dtype(dt), device(dev) {
        LLMT_INTERNAL_CHECK(dims.size() <= static_cast<size_t>(kMaxDims),
                   "tensor: {} dims given, at most {} supported", dims.size(), kMaxDims);
        for (int64_t d : dims) {
            LLMT_INTERNAL_CHECK(d >= 0, "tensor: negative extent {}", d);
            shape[static_cast<size_t>(ndim++)] = d;
        }
    }

    int64_t dim(int i) const { return shape[static_cast<size_t>(i < 0 ? i + ndim : i)]; }
    int64_t numel() const {
        int64_t n = 1;
        for (int i = 0; i < ndim; ++i) n *= shape[static_cast<size_t>(i)];
        return n;
    }
    size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
    bool empty() const { return data == nullptr; }

    // Typed pointer; throws InputError when T does not match dtype.
    template <typename T>
    T* ptr() const {
        LLMT_INTERNAL_CHECK(dtype_of<T>() == dtype, "tensor: element type {} requested from a {} tensor",
                   dtype_name(dtype_of<T>()), dtype_name(dtype));
        return static_cast<T*>(data);
    }

    // "(2, 3, 4) f32 cpu", for error messages.
    std::string describe() const {
        std::string s = "(";
        for (int i = 0; i < ndim; ++i) {
            if (i) s += ", ";
            s += std::to_string(shape[static_cast<size_t>(i)]);
        }
        s += ") ";
        s += dtype_name(dtype);
        s += ' ';
        s += device_name(device);
        return s;
    }
};

}  // namespace llmt
