#include "models/activations.h"

#include "core/check.h"

namespace llmt::models {

ActId ActLayout::add_as(const std::string& name, int64_t width, DType dt) {
    int64_t n = 0;
    LLMT_CHECK(!__builtin_mul_overflow(BT_, width, &n),
               "{}: activations of B*T = {} rows x {} elements overflow 64-bit sizes; lower "
               "trainer.micro_batch_size or the model's widths",
               model_, BT_, width);
    return arena_.add(name, {n}, dt);
}

void Activations::ensure(int B, int T, Device device, const LayoutFn& layout) {
    const int64_t rows = static_cast<int64_t>(B) * T;
    if (acts_.allocated() && rows <= rows_) return;
    acts_ = Arena();  // free the old buffer first: on a GPU the two need not fit together
    Arena a = layout(B, T);
    a.allocate(false, device);
    acts_ = std::move(a);
    rows_ = rows;
}

Tensor Activations::btc(ActId id, int B, int T, int64_t width) const {
    const Tensor v = acts_.view(id);
    return Tensor(v.data, {B, T, width}, v.dtype, acts_.device());
}

Tensor Activations::bt(ActId id, int B, int T) const {
    const Tensor v = acts_.view(id);
    return Tensor(v.data, {B, T}, v.dtype, acts_.device());
}

Tensor Activations::shaped(ActId id, std::initializer_list<int64_t> dims) const {
    const Tensor v = acts_.view(id);
    return Tensor(v.data, dims, v.dtype, acts_.device());
}

}  // namespace llmt::models
