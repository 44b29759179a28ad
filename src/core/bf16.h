// bf16 bit patterns on the host (DType::kBF16 tensors hold them; kernels convert on the device): round
// to nearest even with NaN kept quiet, and the exact widening. bf16 is the upper half of an IEEE fp32.
#pragma once

#include <cstdint>
#include <cstring>

namespace llmt {

inline uint16_t bf16_from_float(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN stays NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}

inline float float_from_bf16(uint16_t b) {
    const uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

}  // namespace llmt
