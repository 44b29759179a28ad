// AdamW over an arena slice (adamw.h). The per-element math lives in kernels/cpu/adamw.cpp; this file
// maps parameter slots to contiguous runs and owns the state and its checkpoint form.
#include "optim/adamw.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "core/error.h"
#include "core/tensor.h"
#include "kernels/ops.h"
#include "optim/state_shards.h"

namespace llmt::optim {
namespace {

constexpr const char* kFormat = "llmtrain.adamw.v1";

Tensor flat(float* p, std::size_t n, Device d) { return Tensor(p, {static_cast<std::int64_t>(n)}, DType::kF32, d); }

}  // namespace

AdamW::AdamW(std::vector<ParamSlot> slots, std::size_t arena_numel, AdamWConfig cfg, ArenaSlice slice, Device device)
    : slots_(std::move(slots)), arena_numel_(arena_numel), cfg_(cfg), device_(device) {
    SlicePlan plan = plan_slice(slots_, arena_numel, slice, "AdamW");
    begin_ = plan.begin;
    end_ = plan.end;
    pieces_ = std::move(plan.pieces);
    runs_ = std::move(plan.runs);
    LLMT_INTERNAL_CHECK(cfg.beta1 >= 0 && cfg.beta1 < 1 && cfg.beta2 >= 0 && cfg.beta2 < 1,
               "AdamW: betas must be in [0, 1), got ({}, {})", cfg.beta1, cfg.beta2);
    LLMT_INTERNAL_CHECK(cfg.eps > 0, "AdamW: eps must be > 0, got {}", cfg.eps);
    if (device_ == Device::kCpu) {
        m_.assign(end_ - begin_, 0.0f);
        v_.assign(end_ - begin_, 0.0f);
    } else {
        device_state_.add("m", {static_cast<std::int64_t>(end_ - begin_)});
        device_state_.add("v", {static_cast<std::int64_t>(end_ - begin_)});
        device_state_.allocate(true, device_);
    }
}

float* AdamW::m_data() const {
    return device_ == Device::kCpu ? m_.data() : static_cast<float*>(device_state_.view(size_t{0}).data);
}
float* AdamW::v_data() const {
    return device_ == Device::kCpu ? v_.data() : static_cast<float*>(device_state_.view(size_t{1}).data);
}

void AdamW::step(float* params, const float* grads, float lr, float grad_scale, Tensor params_lp, ParamsAt at) {
    float* const slice_params = at == ParamsAt::kArena ? params + begin_ : params;
    const float* const slice_grads = at == ParamsAt::kChunk ? grads : grads + begin_;
    LLMT_INTERNAL_CHECK(
        params_lp.empty() || (params_lp.dtype == DType::kBF16 && params_lp.numel() >= static_cast<std::int64_t>(end_)),
        "AdamW: the compute copy must be a bf16 view of the whole arena, got {}", params_lp.describe());
    ++step_;
    kernels::AdamWParams hp;
    hp.lr = lr;
    hp.beta1 = cfg_.beta1;
    hp.beta2 = cfg_.beta2;
    hp.eps = cfg_.eps;
    hp.grad_scale = grad_scale;
    hp.step = static_cast<long>(step_);
    // All runs in one call (one launch on a GPU): offsets relative to the slice.
    hp.weight_decay = cfg_.weight_decay;
    std::vector<kernels::AdamWRun> runs;
    runs.reserve(runs_.size());
    for (const Run& r : runs_)
        runs.push_back(
            {static_cast<std::int64_t>(r.begin - begin_), static_cast<std::int64_t>(r.end - begin_), r.decay});
    const std::size_t n = end_ - begin_;
    Tensor lp;
    if (!params_lp.empty())
        lp = Tensor(static_cast<std::uint16_t*>(params_lp.data) + begin_, {static_cast<std::int64_t>(n)}, DType::kBF16,
                    params_lp.device);
    kernels::adamw_update_runs(flat(slice_params, n, device_), flat(m_data(), n, device_),
                               flat(v_data(), n, device_), flat(const_cast<float*>(slice_grads), n, device_), hp,
                               runs, lp);
}

std::vector<TensorSpec> AdamW::state_specs() const {
    std::vector<TensorSpec> out;
    out.reserve(2 * pieces_.size() + 1);
    for (const Piece& p : pieces_) {
        const ParamSlot& s = slots_[p.slot];
        Shape shape = p.whole ? s.shape : Shape{static_cast<std::int64_t>(p.end - p.begin)};
        out.push_back({s.name + ".exp_avg", StDType::kF32, shape});
        out.push_back({s.name + ".exp_avg_sq", StDType::kF32, shape});
    }
    out.push_back({"step", StDType::kI64, {}});
    return out;
}

std::vector<TensorRef> AdamW::state_tensors() const {
    if (device_ != Device::kCpu) {  // stage the device state in host memory
        const auto n = static_cast<std::int64_t>(end_ - begin_);
        m_.resize(end_ - begin_);
        v_.resize(end_ - begin_);
        kernels::copy(Tensor(m_.data(), {n}), device_state_.view(size_t{0}));
        kernels::copy(Tensor(v_.data(), {n}), device_state_.view(size_t{1}));
    }
    std::vector<TensorSpec> specs = state_specs();
    std::vector<TensorRef> out;
    out.reserve(specs.size());
    for (std::size_t i = 0; i < pieces_.size(); ++i) {
        const std::size_t o = pieces_[i].begin - begin_;
        out.push_back({specs[2 * i].name, StDType::kF32, specs[2 * i].shape, m_.data() + o});
        out.push_back({specs[2 * i + 1].name, StDType::kF32, specs[2 * i + 1].shape, v_.data() + o});
    }
    out.push_back({"step", StDType::kI64, {}, &step_});
    return out;
}

std::map<std::string, std::string> AdamW::state_metadata() const {
    return {{"format", kFormat},
            {"arena_numel", std::to_string(arena_numel_)},
            {"slice_begin", std::to_string(begin_)},
            {"slice_end", std::to_string(end_)}};
}

void AdamW::load_state(const SafetensorsFile& file) {
    check_state_owner(file, kFormat, name());
    const std::vector<TensorSpec> specs = state_specs();
    check_state_matches(file, state_metadata(), specs);
    std::int64_t step = 0;
    file.read_exact("step", StDType::kI64, {}, &step);
    if (step < 0)
        throw CheckpointError(fmt::format("optimizer state '{}': step is {}, expected >= 0", file.path(), step));
    // Every name, dtype and shape was checked above, so the reads below cannot fail half-way: read
    // straight into m_ and v_ (no second 2 x 4 bytes/param allocation, whose page faults are slow).
    if (device_ != Device::kCpu) {
        m_.assign(end_ - begin_, 0.0f);  // alignment gaps between slots stay 0
        v_.assign(end_ - begin_, 0.0f);
    }
    for (std::size_t i = 0; i < pieces_.size(); ++i) {
        const std::size_t o = pieces_[i].begin - begin_;
        file.read_exact(specs[2 * i].name, StDType::kF32, specs[2 * i].shape, m_.data() + o);
        file.read_exact(specs[2 * i + 1].name, StDType::kF32, specs[2 * i + 1].shape, v_.data() + o);
    }
    if (device_ != Device::kCpu) {
        const auto n = static_cast<std::int64_t>(end_ - begin_);
        kernels::copy(device_state_.view(size_t{0}), Tensor(m_.data(), {n}));
        kernels::copy(device_state_.view(size_t{1}), Tensor(v_.data(), {n}));
    }
    step_ = step;
}

void AdamW::load_state_shards(const std::vector<const SafetensorsFile*>& files) {
    std::int64_t step = 0;
    const std::vector<StateShard> shards =
        check_state_shards(files, kFormat, name(), arena_numel_, begin_, end_, &step);
    SlicePlan plan;
    plan.begin = begin_;
    plan.end = end_;
    plan.pieces = pieces_;
    // Every tensor is checked before the first copy, so the CPU state is read in place; a device state is
    // staged in host memory.
    if (device_ != Device::kCpu) {
        m_.assign(end_ - begin_, 0.0f);
        v_.assign(end_ - begin_, 0.0f);
    }
    read_sharded_state(shards, slots_, plan, {{".exp_avg", m_.data()}, {".exp_avg_sq", v_.data()}});
    if (device_ != Device::kCpu) {
        const auto n = static_cast<std::int64_t>(end_ - begin_);
        kernels::copy(device_state_.view(size_t{0}), Tensor(m_.data(), {n}));
        kernels::copy(device_state_.view(size_t{1}), Tensor(v_.data(), {n}));
    }
    step_ = step;
}

}  // namespace llmt::optim
