// Element types a Tensor can hold (docs/design.md §1). Sizes and names only: conversion kernels live in
// src/kernels. bf16 is the upper half of an IEEE fp32; f16 is IEEE binary16.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace llmt {

enum class DType : uint8_t { kF32, kBF16, kF16, kI32, kU16 };

// Bytes per element.
constexpr size_t dtype_size(DType t) {
    switch (t) {
        case DType::kF32: return 4;
        case DType::kBF16: return 2;
        case DType::kF16: return 2;
        case DType::kI32: return 4;
        case DType::kU16: return 2;
    }
    return 0;
}

// Short lowercase name as used in configs and error messages ("f32", "bf16", ...).
constexpr std::string_view dtype_name(DType t) {
    switch (t) {
        case DType::kF32: return "f32";
        case DType::kBF16: return "bf16";
        case DType::kF16: return "f16";
        case DType::kI32: return "i32";
        case DType::kU16: return "u16";
    }
    return "?";
}

// The DType of a C++ element type, for typed accessors: dtype_of<float>() == DType::kF32.
template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() { return DType::kF32; }
template <>
constexpr DType dtype_of<int32_t>() { return DType::kI32; }
template <>
constexpr DType dtype_of<uint16_t>() { return DType::kU16; }

}  // namespace llmt
