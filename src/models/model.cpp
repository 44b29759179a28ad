#include "models/model.h"

#include <fmt/format.h>

#include "core/check.h"
#include "core/error.h"
#include "kernels/ops.h"
#include "models/language_model.h"
#include "models/lm_head.h"

namespace llmt::models {

Recompute recompute_from_name(const std::string& name) {
    if (name == "none") return Recompute::kNone;
    if (name == "gelu" || name == "mlp") return Recompute::kMlp;
    if (name == "all") return Recompute::kAll;
    throw InputError(fmt::format("trainer.recompute: expected one of none, gelu, mlp, all, found '{}'", name));
}

const LanguageModel& as_language_model(const Model& model) {
    if (const LanguageModel* lm = model.language_model()) return *lm;
    throw InputError(fmt::format("model.arch {} classifies images and has no text decoder (use llmtrain predict)",
                                 model.arch()));
}

Decoder::Decoder(const Model& model, int max_T) : dims_(model.dims()) {
    LLMT_INTERNAL_CHECK(!model.lora(), "decoder: the KV-cache decoders read the base weights; merge the LoRA adapters "
                        "into them first (models/lora_merge.h)");
    LLMT_INTERNAL_CHECK(model.device() == Device::kCpu, "decoder: the KV-cache decoder runs on the CPU (model on {})",
                        device_name(model.device()));
    max_T_ = max_T == 0 ? dims_.block_size : max_T;
    LLMT_INTERNAL_CHECK(max_T_ > 0 && max_T_ <= dims_.block_size,
                        "decoder: cache of {} positions; expected 1..model.block_size ({})", max_T_, dims_.block_size);
}

const float* Decoder::prefill(std::span<const int32_t> ids) {
    LLMT_CHECK(!ids.empty(), "decoder: prefill needs at least one token");
    LLMT_CHECK(static_cast<int64_t>(ids.size()) <= max_T_,
               "decoder: prompt of {} tokens exceeds the context of {} positions (model.block_size {})", ids.size(),
               max_T_, dims_.block_size);
    pos_ = 0;
    started_ = true;
    for (size_t i = 0; i < ids.size(); ++i)
        LLMT_CHECK(ids[i] >= 0 && ids[i] < dims_.vocab_size, "decoder: token id {} at position {} is outside [0, {})",
                   ids[i], i, dims_.vocab_size);
    const float* logits = run(ids.data(), static_cast<int>(ids.size()));
    pos_ = static_cast<int>(ids.size());
    return logits;
}

const float* Decoder::step(int32_t id) {
    LLMT_INTERNAL_CHECK(started_, "decoder: step() before prefill()");
    LLMT_CHECK(pos_ < max_T_,
               "decoder: position {} is beyond the context of {} positions (model.block_size {}); start a new "
               "sequence with a shorter prefix",
               pos_, max_T_, dims_.block_size);
    LLMT_CHECK(id >= 0 && id < dims_.vocab_size, "decoder: token id {} at position {} is outside [0, {})", id, pos_,
               dims_.vocab_size);
    const float* logits = run(&id, 1);
    ++pos_;
    return logits;
}

const float* Model::logits() const {
    // all_logits_ is host memory on every device (the forward copies the logits there).
    LLMT_INTERNAL_CHECK(!all_logits_.empty(), "{}: logits() needs a forward without targets first", arch());
    return all_logits_.data();
}

Model::Batch Model::begin_forward(Activations& activations, const Activations::LayoutFn& layout, const int32_t* inputs,
                                  const int32_t* targets, int B, int T, bool train, const int32_t* positions) {
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
    activations.ensure(B, T, device(), layout);
    Arena& acts = activations.arena();
    Batch b;
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
    if (positions) {
        LLMT_CHECK(acts.contains("positions"), "{} forward: position ids (packed examples) need rotary positions; "
                   "this architecture has learned ones", arch());
        for (int r = 0; r < B; ++r)
            for (int t = 0; t < T; ++t) {
                const int32_t p = positions[static_cast<int64_t>(r) * T + t];
                const int32_t prev = t == 0 ? -1 : positions[static_cast<int64_t>(r) * T + t - 1];
                LLMT_CHECK(p == 0 || (t > 0 && p == prev + 1),
                           "{} forward: position id {} at row {}, slot {} must be 0 (an example starts) or the "
                           "previous slot's + 1 ({})", arch(), p, r, t, prev + 1);
            }
        const Tensor pv = acts.view("positions");
        b.positions = Tensor(pv.data, {B, T}, DType::kI32, acts.device());
        kernels::copy(b.positions, Tensor(const_cast<int32_t*>(positions), {B, T}, DType::kI32));
    }
    B_ = B;
    T_ = T;
    if (lora_) lora_->begin(B, T, train, dropout_seed_);
    return b;
}

void Model::layout_params(const LoraSpec& lora, Device device, DType dtype) {
    store_.layout(device, dtype, /*frozen=*/lora.on());
    if (lora.on()) lora_ = std::make_unique<LoraAdapters>(lora, store_.specs(), device, dtype);
}

void Model::allocate_params() {
    store_.allocate();
    if (lora_) lora_->allocate();
}

MemoryPlan Model::params_memory_plan(int B, int T) const {
    MemoryPlan m{store_.param_bytes(), store_.grad_bytes(), 0};
    if (lora_) {
        m.params += lora_->store().param_bytes();
        m.grads += lora_->store().grad_bytes();
        m.activations += lora_->activation_bytes(B, T);
    }
    return m;
}

void Model::linear_forward(Tensor out, Tensor inp, ParamId w, Tensor bias, Tensor residual) {
    kernels::matmul_forward(out, inp, store_.weight(w), bias, residual);
    if (lora_) lora_->forward(w, out, inp);
}

void Model::linear_backward(Tensor dinp, Tensor dout, Tensor inp, ParamId w, Tensor dbias) {
    kernels::matmul_backward(dinp, store_.grad(w), dbias, dout, inp, store_.weight(w));
    if (lora_) lora_->backward(w, dinp, dout, inp);
}

void Model::merge_adapters() {
    if (!lora_) return;
    lora_->merge_into(store_);
    lora_.reset();
}

Tensor Model::grad_or_sink(ParamId id, int slot) {
    if (!store_.frozen()) return store_.grad(id);
    LLMT_INTERNAL_CHECK(slot == 0 || slot == 1, "grad_or_sink: slot {}", slot);
    const std::vector<int64_t>& shape = store_.params().entry(id).shape;  // the layout (ZeRO-3: no buffer)
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    if (!grad_sink_.allocated() || grad_sink_.entry(0).shape[0] < numel) {
        grad_sink_ = Arena();
        grad_sink_.add("sink0", {numel});
        grad_sink_.add("sink1", {numel});
        grad_sink_.allocate(false, store_.device());
    }
    Tensor t = grad_sink_.view(static_cast<size_t>(slot));
    t.ndim = static_cast<int>(shape.size());
    for (size_t d = 0; d < shape.size(); ++d) t.shape[d] = shape[d];
    return t;
}

float Model::head_forward(const Batch& batch, const int32_t* targets, Tensor x, ParamId head, const HeadBuffers& buf,
                          bool train, float loss_scale) {
    const int64_t BT = x.dim(0);
    if (!targets) {
        all_logits_.resize(static_cast<size_t>(BT * dims_.padded_vocab));
        lm_head_logits(all_logits_.data(), x, store_.weight(head), buf.logits);
        return 0.f;
    }
    LmHeadIo io;
    io.x = x;
    io.weight = store_.weight(head);
    io.logits = buf.logits;
    io.losses = buf.losses;
    io.targets = buf.targets;
    if (train) {
        io.dx = buf.dx;
        io.dweight = store_.grad(head);
    }
    // d(mean loss)/d(loss_i) = 1/counted, times the caller's scale (1/grad_accum, ...).
    lm_head_loss(io, dims_.vocab_size, loss_scale / static_cast<float>(batch.counted));
    std::vector<float> host_losses(static_cast<size_t>(BT));
    kernels::copy(Tensor(host_losses.data(), {BT}), buf.losses);
    double sum = 0;
    for (int64_t i = 0; i < BT; ++i)
        if (targets[i] >= 0) sum += host_losses[static_cast<size_t>(i)];
    return static_cast<float>(sum / static_cast<double>(batch.counted));
}

}  // namespace llmt::models
