// Floats to and from a tensor stored as fp32 or bf16 (by its dtype; bf16 rounded to nearest even on the way
// in), through kernels::copy: how the CUDA kernel tests fill device tensors and read them back.
#pragma once

#include <cstdint>
#include <vector>

#include "core/bf16.h"
#include "kernels/ops.h"

namespace llmt::kernels::test {

inline void upload_floats(const Tensor& d, const std::vector<float>& v) {
    if (d.dtype == DType::kBF16) {
        std::vector<uint16_t> b(v.size());
        for (size_t i = 0; i < v.size(); i++) b[i] = bf16_from_float(v[i]);
        copy(d, Tensor(b.data(), {d.numel()}, DType::kBF16));
    } else {
        copy(d, Tensor(const_cast<float*>(v.data()), {d.numel()}));
    }
}

inline std::vector<float> download_floats(const Tensor& d) {
    std::vector<float> v(static_cast<size_t>(d.numel()));
    if (d.dtype == DType::kBF16) {
        std::vector<uint16_t> b(v.size());
        copy(Tensor(b.data(), {d.numel()}, DType::kBF16), d);
        for (size_t i = 0; i < v.size(); i++) v[i] = float_from_bf16(b[i]);
    } else {
        copy(Tensor(v.data(), {d.numel()}), d);
    }
    return v;
}

}  // namespace llmt::kernels::test
