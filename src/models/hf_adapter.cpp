#include "models/hf_adapter.h"

#include <fmt/format.h>

#include <cstring>
#include <map>
#include <set>

#include "core/check.h"
#include "core/error.h"
#include "kernels/ops.h"

namespace llmt::models {

namespace {

// Elements per row of ours (the product of the trailing dims).
int64_t row_width(const ParamSpec& s) {
    int64_t w = 1;
    for (size_t d = 1; d < s.shape.size(); ++d) w *= s.shape[d];
    return w;
}

// The shape HF stores part `p` of `s` with.
Shape hf_shape(const ParamSpec& s, const HfPart& p) {
    Shape sh(s.shape.begin(), s.shape.end());
    sh[0] = p.rows;
    if (s.hf_transposed) std::swap(sh[0], sh[1]);
    return sh;
}

bool is_float(StDType t) {
    return t == StDType::kF32 || t == StDType::kBF16 || t == StDType::kF16 || t == StDType::kF64;
}

// Copies `rows` x `width` floats, transposing from HF's (width, rows) when asked.
void place_rows(float* dst, const float* src, int64_t rows, int64_t width, bool transposed) {
    if (!transposed) {
        std::memcpy(dst, src, static_cast<size_t>(rows * width) * sizeof(float));
        return;
    }
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < width; ++k) dst[r * width + k] = src[k * rows + r];
}

}  // namespace

std::vector<TensorRef> hf_tensors(const std::vector<ParamSpec>& specs, const Arena& arena,
                                  std::vector<std::vector<float>>& scratch) {
    std::vector<const float*> data;
    for (size_t i = 0; i < specs.size(); ++i) data.push_back(static_cast<const float*>(arena.view(i).data));
    return hf_tensors(specs, data, scratch);
}

std::vector<TensorRef> hf_tensors(const std::vector<ParamSpec>& specs, const std::vector<const float*>& data,
                                  std::vector<std::vector<float>>& scratch) {
    std::vector<TensorRef> out;
    scratch.clear();
    size_t transposed = 0;
    for (const auto& s : specs) transposed += s.hf_transposed ? s.hf.size() : 0;
    scratch.reserve(transposed);  // refs into scratch must not move
    for (size_t i = 0; i < specs.size(); ++i) {
        const auto& s = specs[i];
        const float* src = data[i];
        const int64_t width = row_width(s);
        int64_t row = 0;
        for (const auto& p : s.hf) {
            const float* rows = src + row * width;
            if (s.hf_transposed) {  // ours (rows, width) -> HF (width, rows)
                auto& buf = scratch.emplace_back(static_cast<size_t>(p.rows * width));
                for (int64_t r = 0; r < p.rows; ++r)
                    for (int64_t k = 0; k < width; ++k) buf[static_cast<size_t>(k * p.rows + r)] = rows[r * width + k];
                rows = buf.data();
            }
            out.push_back({p.name, StDType::kF32, hf_shape(s, p), rows});
            row += p.rows;
        }
    }
    return out;
}

namespace {

// Checks every HF tensor of `source` against `specs` (load_hf's CheckpointError); returns the source's name
// of each canonical name.
std::map<std::string, std::string> check_hf_tensors(const std::vector<ParamSpec>& specs,
                                                    const CanonicalName& canonical, std::string_view what,
                                                    const TensorSource& source) {
    std::map<std::string, std::string> by_canonical;  // canonical -> name in the source
    for (const auto& n : source.names()) {
        std::string c = canonical(n);
        if (!c.empty()) by_canonical[c] = n;
    }
    std::vector<std::string> problems;
    std::set<std::string> used;
    for (const auto& s : specs) {
        for (const auto& p : s.hf) {
            const Shape want = hf_shape(s, p);
            auto it = by_canonical.find(p.name);
            if (it == by_canonical.end()) {
                problems.push_back(fmt::format("missing tensor `{}` (expected shape {})", p.name, shape_str(want)));
                continue;
            }
            used.insert(it->first);
            const TensorInfo& info = source.info(it->second);
            // Only untransposed tables crop (their first rows are a prefix of HF's row-major data).
            LLMT_INTERNAL_CHECK(!(s.hf_crop_rows && s.hf_transposed), "hf: `{}` cannot crop a transposed tensor",
                                s.name);
            bool ok = info.shape.size() == want.size();
            for (size_t d = 0; ok && d < want.size(); ++d) {
                const bool crop_dim = s.hf_crop_rows && d == 0;
                ok = crop_dim ? info.shape[d] >= want[d] : info.shape[d] == want[d];
            }
            if (!ok)
                problems.push_back(fmt::format("`{}`: expected shape {}{}, found {}", p.name, shape_str(want),
                                               s.hf_crop_rows ? " (or more rows)" : "", shape_str(info.shape)));
            if (!is_float(info.dtype))
                problems.push_back(
                    fmt::format("`{}`: expected a float dtype, found {}", p.name, st_dtype_name(info.dtype)));
        }
    }
    for (const auto& [canon, name] : by_canonical)
        if (!used.count(canon)) problems.push_back(fmt::format("unexpected tensor `{}`", name));
    if (!problems.empty()) {
        std::string msg = fmt::format("'{}' does not match the {} ({} difference{}):", source.label(), what,
                                      problems.size(), problems.size() == 1 ? "" : "s");
        for (const auto& p : problems) msg += "\n  " + p;
        throw CheckpointError(msg);
    }
    return by_canonical;
}

// Tensor `s` (fp32, our layout) from its HF parts in `source`; padding rows 0.
void read_hf_tensor(const ParamSpec& s, const std::map<std::string, std::string>& by_canonical,
                    const TensorSource& source, float* dst, std::vector<float>& tmp) {
    const int64_t width = row_width(s);
    int64_t row = 0;
    for (const auto& p : s.hf) {
        const std::string& name = by_canonical.at(p.name);
        const TensorInfo& info = source.info(name);
        tmp.resize(static_cast<size_t>(info.numel));
        source.read_f32(name, tmp.data(), info.shape);
        // A cropped table keeps its first rows (HF's row-major (rows, width) layout: a prefix).
        place_rows(dst + row * width, tmp.data(), p.rows, width, s.hf_transposed);
        row += p.rows;
    }
    std::memset(dst + row * width, 0, static_cast<size_t>((s.shape[0] - row) * width) * sizeof(float));
}

}  // namespace

void load_hf(const std::vector<ParamSpec>& specs, const CanonicalName& canonical, std::string_view what, Arena& arena,
             const TensorSource& source) {
    const auto by_canonical = check_hf_tensors(specs, canonical, what, source);
    std::vector<float> tmp;
    for (size_t i = 0; i < specs.size(); ++i)
        read_hf_tensor(specs[i], by_canonical, source, static_cast<float*>(arena.view(i).data), tmp);
}

Arena host_copy(const Arena& a) {
    Arena h;
    for (const auto& e : a.entries()) h.add(e.name, std::vector<int64_t>(e.shape), e.dtype);
    h.allocate(false);
    kernels::copy(Tensor(h.data(), {static_cast<int64_t>(h.nbytes() / 4)}),
                  Tensor(a.data(), {static_cast<int64_t>(a.nbytes() / 4)}, DType::kF32, a.device()));
    return h;
}

Arena host_f32_copy(const ParamStore& store) {
    Arena h;
    for (const auto& e : store.params().entries()) h.add(e.name, std::vector<int64_t>(e.shape));
    h.allocate(false);
    for (size_t i = 0; i < store.specs().size(); ++i) {
        const std::vector<float> v = store.read_f32(i);
        std::memcpy(h.view(i).data, v.data(), v.size() * sizeof(float));
    }
    return h;
}

namespace {

// HF tensors into `store` on any device and dtype: checked, then read tensor by tensor into one tensor's fp32
// host buffer and written (converted to bf16 for a frozen bf16 store, cut to this rank's chunks under
// ZeRO-3), the compute copy refreshed: never a second copy of the whole model.
void load_into(ParamStore& store, const CanonicalName& canonical, std::string_view what, const TensorSource& source) {
    const bool f32_store = store.specs().empty() || store.params().entry(0).dtype == DType::kF32;
    if (store.device() == Device::kCpu && f32_store && !store.groups_sharded()) {  // in place
        load_hf(store.specs(), canonical, what, store.params(), source);
        return;
    }
    const auto by_canonical = check_hf_tensors(store.specs(), canonical, what, source);
    std::vector<float> host, tmp;
    for (size_t i = 0; i < store.specs().size(); ++i) {
        const auto& s = store.specs()[i];
        int64_t n = 1;
        for (int64_t d : s.shape) n *= d;
        host.resize(static_cast<size_t>(n));
        read_hf_tensor(s, by_canonical, source, host.data(), tmp);
        store.write_f32(i, host.data());
    }
    store.sync_compute_params();
}

}  // namespace

void load_hf_params(Model& model, const TensorSource& source) {
    load_into(
        model.base(), canonical_names(model),
        fmt::format("{} model", model.arch()), source);
}

void load_trained_params(Model& model, const TensorSource& source) {
    if (!model.lora()) return load_hf_params(model, source);
    load_into(
        model.trained(), [](const std::string& n) { return n; }, "LoRA adapters", source);
}

}  // namespace llmt::models
