#include "models/lora.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <regex>

#include "core/check.h"
#include "core/error.h"

namespace llmt::models {

namespace {

constexpr const char* kWeightSuffix = ".weight";

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string module_of(const std::string& hf_name) {
    return ends_with(hf_name, kWeightSuffix) ? hf_name.substr(0, hf_name.size() - 7) : hf_name;
}

bool is_regex(const std::string& t) { return t.find_first_of("\\.*+?[](){}|^$") != std::string::npos; }

// PEFT's matching of a list entry: the whole name, or its last dotted components.
bool matches_suffix(const std::string& module, const std::string& target) {
    return module == target || ends_with(module, "." + target);
}

}  // namespace

float LoraSpec::scale() const {
    return static_cast<float>(rslora ? alpha / std::sqrt(static_cast<double>(r)) : alpha / r);
}

std::vector<std::string> lora_candidate_modules(const std::vector<ParamSpec>& base) {
    std::vector<std::string> out;
    for (const auto& s : base) {
        if (s.kind != ParamKind::kWeight || s.shape.size() != 2) continue;
        for (const auto& p : s.hf)
            if (p.name != "lm_head.weight") out.push_back(module_of(p.name));
    }
    return out;
}

std::vector<std::string> lora_select_modules(const LoraSpec& spec, const std::vector<ParamSpec>& base) {
    const std::vector<std::string> all = lora_candidate_modules(base);
    const auto& t = spec.target_modules;
    if (t.size() == 1 && t[0] == "all-linear") return all;
    std::vector<std::string> out;
    if (t.size() == 1 && is_regex(t[0])) {
        std::regex re;
        try {
            re = std::regex(t[0], std::regex::ECMAScript);
        } catch (const std::regex_error& e) {
            throw InputError(fmt::format("lora.target_modules: '{}' is not a valid regular expression ({})", t[0],
                                         e.what()));
        }
        for (const auto& m : all)
            if (std::regex_match(m, re)) out.push_back(m);
        if (out.empty())
            throw InputError(fmt::format("lora.target_modules: the regular expression '{}' matches no linear module "
                                         "(e.g. '{}')", t[0], all.empty() ? "" : all.front()));
        return out;
    }
    LLMT_CHECK(!t.empty(), "lora.target_modules: empty; name modules (e.g. q_proj, v_proj), 'all-linear' or a regex");
    for (const auto& target : t) {
        LLMT_CHECK(target != "all-linear", "lora.target_modules: 'all-linear' must be the only entry");
        LLMT_CHECK(
            std::any_of(all.begin(), all.end(), [&](const std::string& m) { return matches_suffix(m, target); }),
            "lora.target_modules: '{}' matches no linear module of this model (its last names: {})", target, [&] {
                std::vector<std::string> last;
                for (const auto& m : all) {
                    std::string n = m.substr(m.rfind('.') + 1);
                    if (std::find(last.begin(), last.end(), n) == last.end()) last.push_back(n);
                }
                return fmt::format("{}", fmt::join(last, ", "));
            }());
    }
    for (const auto& m : all)
        if (std::any_of(t.begin(), t.end(), [&](const std::string& target) { return matches_suffix(m, target); }))
            out.push_back(m);
    return out;
}

LoraAdapters::LoraAdapters(const LoraSpec& spec, const std::vector<ParamSpec>& base, Device device, DType dtype)
    : spec_(spec) {
    LLMT_CHECK(spec.r > 0, "lora.r: expected a rank >= 1, found {}", spec.r);
    modules_ = lora_select_modules(spec, base);
    const int64_t r = spec.r;
    for (ParamId id = 0; id < base.size(); ++id) {
        const ParamSpec& s = base[id];
        if (s.kind != ParamKind::kWeight || s.shape.size() != 2) continue;
        Projection pr;
        std::vector<HfPart> a_parts, b_parts;
        int64_t col = 0;
        for (const auto& p : s.hf) {
            const std::string m = module_of(p.name);
            if (std::find(modules_.begin(), modules_.end(), m) != modules_.end()) {
                pr.spans.push_back({col, p.rows});
                a_parts.push_back({"base_model.model." + m + ".lora_A.weight", r});
                b_parts.push_back({"base_model.model." + m + ".lora_B.weight", p.rows});
            }
            col += p.rows;
        }
        if (pr.spans.empty()) continue;
        const int64_t in = s.shape[1], P = static_cast<int64_t>(pr.spans.size());
        int64_t out_rows = 0;
        for (const auto& sp : pr.spans) out_rows += sp.rows;
        ParamSpec a = ParamSpec::make(s.name + ".lora_A", {P * r, in}, ParamInit::kKaimingUniform, ParamKind::kWeight);
        a.hf = std::move(a_parts);
        ParamSpec b = ParamSpec::make(s.name + ".lora_B", {out_rows, r}, ParamInit::kZeros, ParamKind::kWeight);
        b.hf = std::move(b_parts);
        pr.a = store_.add(std::move(a));
        pr.b = store_.add(std::move(b));
        max_width_ = std::max(max_width_, P * r);
        max_in_ = std::max(max_in_, in);
        pr.in = in;
        pr.u = by_base_.size();  // layout() adds the B-inputs in this (map) order, then du
        by_base_[id] = pr;
    }
    du_ = by_base_.size();
    xd_ = du_ + 1;
    dxd_ = du_ + 2;
    store_.layout(device, dtype);
    for (const auto& [base_id, pr] : by_base_) ready_.push_back({base_id, store_.grad_offset(pr.a)});
}

Arena LoraAdapters::layout(int B, int T) const {
    ActLayout a("lora", static_cast<int64_t>(B) * T, store_.dtype());
    ActId next = 0;
    for (const auto& [base_id, pr] : by_base_) {
        LLMT_INTERNAL_CHECK(pr.u == next++, "lora: activation order");
        a.add(fmt::format("u.{}", base_id), static_cast<int64_t>(pr.spans.size()) * spec_.r);
    }
    a.add("du", max_width_);
    if (spec_.dropout > 0) {
        a.add("xd", max_in_);
        a.add("dxd", max_in_);
    }
    return a.take();
}

void LoraAdapters::begin(int B, int T, bool train, uint64_t seed) {
    acts_.ensure(B, T, store_.device(), [this](int b, int t) { return layout(b, t); });
    B_ = B;
    T_ = T;
    train_ = train;
    seed_ = seed;
}

Tensor LoraAdapters::dropped_input(ParamId w, const Projection& pr, Tensor inp) {
    Tensor xd = acts_.btc(xd_, B_, T_, pr.in);
    kernels::dropout_forward(xd, inp, static_cast<float>(spec_.dropout), mask_seed(w));
    return xd;
}

void LoraAdapters::forward(ParamId w, Tensor out, Tensor inp) {
    auto it = by_base_.find(w);
    if (it == by_base_.end()) return;
    const Projection& pr = it->second;
    const int64_t width = static_cast<int64_t>(pr.spans.size()) * spec_.r;
    const Tensor x = dropped() ? dropped_input(w, pr, inp) : inp;
    kernels::lora_forward(out, acts_.btc(pr.u, B_, T_, width), x, store_.weight(pr.a), store_.weight(pr.b), scale(),
                          pr.spans);
}

void LoraAdapters::backward(ParamId w, Tensor dinp, Tensor dout, Tensor inp) {
    auto it = by_base_.find(w);
    if (it == by_base_.end()) return;
    const Projection& pr = it->second;
    const int64_t width = static_cast<int64_t>(pr.spans.size()) * spec_.r;
    if (!dropped()) {
        kernels::lora_backward(dinp, store_.grad(pr.a), store_.grad(pr.b), acts_.btc(du_, B_, T_, width), dout,
                               acts_.btc(pr.u, B_, T_, width), inp, store_.weight(pr.a), store_.weight(pr.b), scale(),
                               pr.spans);
        return;
    }
    // The mask again from the same seed; the adapters' input gradient goes back through it into dinp.
    const Tensor xd = dropped_input(w, pr, inp);
    const Tensor dxd = acts_.btc(dxd_, B_, T_, pr.in);
    kernels::zero(dxd);
    kernels::lora_backward(dxd, store_.grad(pr.a), store_.grad(pr.b), acts_.btc(du_, B_, T_, width), dout,
                           acts_.btc(pr.u, B_, T_, width), xd, store_.weight(pr.a), store_.weight(pr.b), scale(),
                           pr.spans);
    kernels::dropout_backward(dxd, dxd, static_cast<float>(spec_.dropout), mask_seed(w));
    kernels::residual_forward(dinp, dinp, dxd);
}

void LoraAdapters::merge_into(ParamStore& base) const {
    const int64_t r = spec_.r;
    const double scale = spec_.scale();
    for (const auto& [base_id, pr] : by_base_) {
        std::vector<float> w = base.read_f32(base_id);
        const std::vector<float> a = store_.read_f32(pr.a), b = store_.read_f32(pr.b);
        const int64_t in = base.spec(base_id).shape[1];
        int64_t brow = 0;
        for (size_t p = 0; p < pr.spans.size(); ++p) {
            const kernels::LoraSpan& s = pr.spans[p];
            const float* A = a.data() + static_cast<int64_t>(p) * r * in;  // (r, in)
#pragma omp parallel for schedule(static)
            for (int64_t i = 0; i < s.rows; ++i) {
                const float* Bi = b.data() + (brow + i) * r;  // row i of B_p
                float* Wi = w.data() + (s.col + i) * in;
                for (int64_t j = 0; j < in; ++j) {
                    double acc = 0;  // the delta in double, added to fp32 once
                    for (int64_t k = 0; k < r; ++k) acc += static_cast<double>(Bi[k]) * A[k * in + j];
                    Wi[j] = static_cast<float>(Wi[j] + scale * acc);
                }
            }
            brow += s.rows;
        }
        base.write_f32(base_id, w.data());
    }
    base.sync_compute_params();
}

size_t LoraAdapters::ready_offset(ParamId base_first) const {
    for (const auto& [base_id, offset] : ready_)
        if (base_id >= base_first) return offset;
    return store_.grads().nbytes();
}

}  // namespace llmt::models
