// SGD with momentum over an arena slice (sgd.h). The per-element math lives in kernels/cpu/sgd.cpp and
// kernels/cuda/sgd.cu; this file owns the buffer and its checkpoint form.
#include "optim/sgd.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/check.h"
#include "core/error.h"
#include "core/tensor.h"
#include "kernels/ops.h"
#include "optim/state_shards.h"

namespace llmt::optim {
namespace {

constexpr const char* kFormat = "llmtrain.sgd.v1";
constexpr const char* kBufferSuffix = ".momentum_buffer";

Tensor flat(float* p, std::size_t n, Device d) { return Tensor(p, {static_cast<std::int64_t>(n)}, DType::kF32, d); }

}  // namespace

Sgd::Sgd(std::vector<ParamSlot> slots, std::size_t arena_numel, SgdConfig cfg, ArenaSlice slice, Device device)
    : slots_(std::move(slots)), arena_numel_(arena_numel), cfg_(cfg), device_(device) {
    SlicePlan plan = plan_slice(slots_, arena_numel, slice, "SGD");
    begin_ = plan.begin;
    end_ = plan.end;
    pieces_ = std::move(plan.pieces);
    for (const SlicePlan::Run& r : plan.runs)
        runs_.push_back(
            {static_cast<std::int64_t>(r.begin - begin_), static_cast<std::int64_t>(r.end - begin_), r.decay});
    LLMT_INTERNAL_CHECK(cfg.momentum >= 0 && cfg.dampening >= 0 && cfg.dampening <= 1 && cfg.weight_decay >= 0,
                        "SGD: momentum {} and weight decay {} must be >= 0, dampening {} in [0, 1]", cfg.momentum,
                        cfg.weight_decay, cfg.dampening);
    LLMT_INTERNAL_CHECK(!cfg.nesterov || (cfg.momentum > 0 && cfg.dampening == 0),
                        "SGD: Nesterov momentum needs momentum > 0 and dampening 0, got {} and {}", cfg.momentum,
                        cfg.dampening);
    if (!has_buffer()) return;
    if (device_ == Device::kCpu) {
        buf_.assign(end_ - begin_, 0.0f);
    } else {
        device_buf_.add("momentum_buffer", {static_cast<std::int64_t>(end_ - begin_)});
        device_buf_.allocate(true, device_);
    }
}

float* Sgd::buf_data() const {
    if (!has_buffer()) return nullptr;
    return device_ == Device::kCpu ? buf_.data() : static_cast<float*>(device_buf_.view(size_t{0}).data);
}

void Sgd::step(float* params, const float* grads, float lr, float grad_scale, Tensor params_lp, ParamsAt at) {
    float* const slice_params = at == ParamsAt::kArena ? params + begin_ : params;
    const float* const slice_grads = at == ParamsAt::kChunk ? grads : grads + begin_;
    LLMT_INTERNAL_CHECK(
        params_lp.empty() || (params_lp.dtype == DType::kBF16 && params_lp.numel() >= static_cast<std::int64_t>(end_)),
        "SGD: the compute copy must be a bf16 view of the whole arena, got {}", params_lp.describe());
    kernels::SgdParams hp;
    hp.lr = lr;
    hp.momentum = cfg_.momentum;
    hp.dampening = cfg_.dampening;
    hp.weight_decay = cfg_.weight_decay;
    hp.nesterov = cfg_.nesterov;
    hp.first_step = step_ == 0;
    hp.grad_scale = grad_scale;
    const std::size_t n = end_ - begin_;
    Tensor lp;
    if (!params_lp.empty())
        lp = Tensor(static_cast<std::uint16_t*>(params_lp.data) + begin_, {static_cast<std::int64_t>(n)}, DType::kBF16,
                    params_lp.device);
    Tensor buf = has_buffer() ? flat(buf_data(), n, device_) : Tensor();
    kernels::sgd_update_runs(flat(slice_params, n, device_), buf, flat(const_cast<float*>(slice_grads), n, device_),
                             hp, runs_, lp);
    ++step_;
}

std::vector<TensorSpec> Sgd::state_specs() const {
    std::vector<TensorSpec> out;
    if (has_buffer()) {
        out.reserve(pieces_.size() + 1);
        for (const SlicePlan::Piece& p : pieces_) {
            const ParamSlot& s = slots_[p.slot];
            out.push_back({s.name + kBufferSuffix, StDType::kF32,
                           p.whole ? s.shape : Shape{static_cast<std::int64_t>(p.end - p.begin)}});
        }
    }
    out.push_back({"step", StDType::kI64, {}});
    return out;
}

std::vector<TensorRef> Sgd::state_tensors() const {
    if (has_buffer() && device_ != Device::kCpu) {  // stage the device buffer in host memory
        buf_.resize(end_ - begin_);
        kernels::copy(Tensor(buf_.data(), {static_cast<std::int64_t>(end_ - begin_)}), device_buf_.view(size_t{0}));
    }
    const std::vector<TensorSpec> specs = state_specs();
    std::vector<TensorRef> out;
    out.reserve(specs.size());
    for (std::size_t i = 0; i + 1 < specs.size(); ++i)
        out.push_back({specs[i].name, StDType::kF32, specs[i].shape, buf_.data() + (pieces_[i].begin - begin_)});
    out.push_back({"step", StDType::kI64, {}, &step_});
    return out;
}

std::map<std::string, std::string> Sgd::state_metadata() const {
    return {{"format", kFormat},
            {"arena_numel", std::to_string(arena_numel_)},
            {"slice_begin", std::to_string(begin_)},
            {"slice_end", std::to_string(end_)}};
}

void Sgd::load_state(const SafetensorsFile& file) {
    check_state_owner(file, kFormat, name());
    const std::vector<TensorSpec> specs = state_specs();
    check_state_matches(file, state_metadata(), specs,
                        has_buffer() ? "" : "; trainer.momentum 0 keeps no momentum buffer");
    std::int64_t step = 0;
    file.read_exact("step", StDType::kI64, {}, &step);
    if (step < 0)
        throw CheckpointError(fmt::format("optimizer state '{}': step is {}, expected >= 0", file.path(), step));
    if (has_buffer()) {  // every name, dtype and shape was checked above: the reads cannot fail half-way
        if (device_ != Device::kCpu) buf_.assign(end_ - begin_, 0.0f);  // alignment gaps stay 0
        for (std::size_t i = 0; i < pieces_.size(); ++i)
            file.read_exact(specs[i].name, StDType::kF32, specs[i].shape, buf_.data() + (pieces_[i].begin - begin_));
        if (device_ != Device::kCpu)
            kernels::copy(device_buf_.view(size_t{0}),
                          Tensor(buf_.data(), {static_cast<std::int64_t>(end_ - begin_)}));
    }
    step_ = step;
}

void Sgd::load_state_shards(const std::vector<const SafetensorsFile*>& files) {
    std::int64_t step = 0;
    const std::vector<StateShard> shards =
        check_state_shards(files, kFormat, name(), arena_numel_, begin_, end_, &step);
    if (has_buffer()) {
        SlicePlan plan;
        plan.begin = begin_;
        plan.end = end_;
        plan.pieces = pieces_;
        // Every tensor is checked before the first copy: the CPU buffer is read in place.
        if (device_ != Device::kCpu) buf_.assign(end_ - begin_, 0.0f);
        read_sharded_state(shards, slots_, plan, {{kBufferSuffix, buf_.data()}});
        if (device_ != Device::kCpu)
            kernels::copy(device_buf_.view(size_t{0}),
                          Tensor(buf_.data(), {static_cast<std::int64_t>(end_ - begin_)}));
    }
    step_ = step;
}

}  // namespace llmt::optim
