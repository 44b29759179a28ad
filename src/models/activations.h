// A model's activation buffers: an arena laid out for (B, T) by the architecture, regrown when B*T
// grows, and views of its buffers as (B, T, width) tensors. Buffers are added in a fixed order, so the
// indices an architecture takes from a first layout are typed handles valid for every later one.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/arena.h"
#include "core/tensor.h"

namespace llmt::models {

using ActId = size_t;

// Builds an activation layout: buffers of `width` elements per (b, t) row (rows = B*T), in the compute
// dtype or fp32 (statistics, losses) or i32 (ids). Sizes beyond 64 bits are an InputError naming the
// model, not a wrapped small allocation.
class ActLayout {
public:
    ActLayout(std::string model, int64_t BT, DType compute) : model_(std::move(model)), BT_(BT), dtype_(compute) {}
    ActId add(const std::string& name, int64_t width) { return add_as(name, width, dtype_); }
    ActId add_f32(const std::string& name, int64_t width) { return add_as(name, width, DType::kF32); }
    ActId add_i32(const std::string& name, int64_t width) { return add_as(name, width, DType::kI32); }
    // A buffer of a fixed element count (not per row): the LM head's chunk of logits.
    ActId add_fixed(const std::string& name, int64_t numel) { return arena_.add(name, {numel}, dtype_); }
    int64_t rows() const { return BT_; }
    DType dtype() const { return dtype_; }
    size_t nbytes() const { return arena_.nbytes(); }  // of the buffers added so far
    Arena take() { return std::move(arena_); }

private:
    ActId add_as(const std::string& name, int64_t width, DType dt);
    std::string model_;
    int64_t BT_ = 0;
    DType dtype_ = DType::kF32;
    Arena arena_;
};

class Activations {
public:
    using LayoutFn = std::function<Arena(int B, int T)>;
    // Allocates the layout for (B, T) unless the current arena already holds B*T rows.
    void ensure(int B, int T, Device device, const LayoutFn& layout);
    Arena& arena() { return acts_; }
    const Arena& arena() const { return acts_; }
    // The first B*T*width elements of buffer `id` as (B, T, width) / (B, T), in the buffer's dtype.
    Tensor btc(ActId id, int B, int T, int64_t width) const;
    Tensor bt(ActId id, int B, int T) const;
    // Any shape over the start of buffer `id`.
    Tensor shaped(ActId id, std::initializer_list<int64_t> dims) const;

private:
    Arena acts_;
    int64_t rows_ = 0;  // B*T the arena holds
};

}  // namespace llmt::models
