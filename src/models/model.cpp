#include "models/model.h"

#include <fmt/format.h>

#include "core/check.h"
#include "core/error.h"
#include "kernels/ops.h"

namespace llmt::models {

Recompute recompute_from_name(const std::string& name) {
    if (name == "none") return Recompute::kNone;
    if (name == "gelu" || name == "mlp") return Recompute::kMlp;
    if (name == "all") return Recompute::kAll;
    throw InputError(fmt::format("trainer.recompute: expected one of none, gelu, mlp, all, found '{}'", name));
}

const float* Model::logits() const {
    LLMT_INTERNAL_CHECK(device() == Device::kCpu, "{}: logits() reads host memory; this model is on {}", arch(),
                        device_name(device()));
    LLMT_INTERNAL_CHECK(!all_logits_.empty(), "{}: logits() needs a forward without targets first", arch());
    return all_logits_.data();
}

Model::Batch Model::begin_forward(Arena& acts, const int32_t* inputs, const int32_t* targets, int B, int T, bool train) {
    LLMT_INTERNAL_CHECK(B > 0 && T > 0, "{} forward: B and T must be positive (B {}, T {})", arch(), B, T);
    LLMT_CHECK(T <= dims_.block_size, "{} forward: sequence length {} exceeds model.block_size {}", arch(), T,
               dims_.block_size);
    LLMT_INTERNAL_CHECK(!train || targets, "{} forward: training needs targets", arch());
    const int64_t BT = static_cast<int64_t>(B) * T;
    // The CPU kernels range-check ids themselves; device kernels do not (kernels/ops.h).
    if (device() != Device::kCpu) {
        for (int64_t i = 0; i < BT; ++i) {
            LLMT_CHECK(inputs[i] >= 0 && inputs[i] < dims_.padded_vocab,
                       "{} forward: token id {} at position {} is outside [0, {})", arch(), inputs[i], i,
                       dims_.padded_vocab);
            LLMT_CHECK(!targets || targets[i] < dims_.vocab_size, "{} forward: target {} at position {} is >= V = {}",
                       arch(), targets[i], i, dims_.vocab_size);
        }
    }
    Batch b{B, T, 0};
    const Tensor in = acts.view("inputs");
    kernels::copy(Tensor(in.data, {B, T}, DType::kI32, acts.device()),
                  Tensor(const_cast<int32_t*>(inputs), {B, T}, DType::kI32));
    if (targets) {
        for (int64_t i = 0; i < BT; ++i) b.counted += targets[i] >= 0;
        LLMT_CHECK(b.counted > 0, "{} forward: every target is ignored (< 0)", arch());
        const Tensor tg = acts.view("targets");
        kernels::copy(Tensor(tg.data, {B, T}, DType::kI32, acts.device()),
                      Tensor(const_cast<int32_t*>(targets), {B, T}, DType::kI32));
    }
    last_B_ = B;
    last_T_ = T;
    return b;
}

}  // namespace llmt::models
