// Our parameters <-> Hugging Face tensors, for every architecture, driven by the parameter table: each
// ParamSpec names the HF tensors holding it (several for a fused tensor: LLaMA's q|k|v, gate|up), whether
// HF stores it transposed (GPT-2's Conv1D), padding rows HF does not have, and position tables that may
// be cropped. The architecture adds only its hub spellings (LanguageModel::hf_canonical_name).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/safetensors.h"
#include "models/hf_weights.h"
#include "models/language_model.h"

namespace llmt::models {

// Named tensors to read from: one safetensors file, or a sharded HF directory (models/hf_weights.h).
class TensorSource {
public:
    virtual ~TensorSource() = default;
    virtual std::string label() const = 0;  // for messages: the file or directory
    virtual std::vector<std::string> names() const = 0;
    virtual const TensorInfo& info(std::string_view name) const = 0;
    // fp32 copy (from F32/BF16/F16/F64); FormatError when the shape differs.
    virtual void read_f32(std::string_view name, float* dst, const Shape& shape) const = 0;
};

// A TensorSource over one opened safetensors file (not owned).
class SafetensorsSource final : public TensorSource {
public:
    explicit SafetensorsSource(const SafetensorsFile& file) : file_(file) {}
    std::string label() const override { return file_.path(); }
    std::vector<std::string> names() const override { return file_.names(); }
    const TensorInfo& info(std::string_view name) const override { return file_.info(name); }
    void read_f32(std::string_view name, float* dst, const Shape& shape) const override {
        file_.read_f32(name, dst, shape);
    }

private:
    const SafetensorsFile& file_;
};

// A TensorSource over opened HF weights: one file or a sharded directory (not owned).
class HfWeightsSource final : public TensorSource {
public:
    explicit HfWeightsSource(const HfWeights& weights) : w_(weights) {}
    std::string label() const override { return w_.source().string(); }
    std::vector<std::string> names() const override { return w_.names(); }
    const TensorInfo& info(std::string_view name) const override { return w_.info(name); }
    void read_f32(std::string_view name, float* dst, const Shape& shape) const override {
        w_.read_f32(name, dst, shape);
    }

private:
    const HfWeights& w_;
};

// The HF tensors of `arena` (an fp32 arena laid out like `specs`: parameters, gradients), in table order.
// Refs point into `arena` or into `scratch` (transposed copies), which must outlive their use.
std::vector<TensorRef> hf_tensors(const std::vector<ParamSpec>& specs, const Arena& arena,
                                  std::vector<std::vector<float>>& scratch);
// The same for tensors whose fp32 host values lie anywhere: `data[i]` holds specs[i]'s (ZeRO-3 writes one
// gathered unit at a time).
std::vector<TensorRef> hf_tensors(const std::vector<ParamSpec>& specs, const std::vector<const float*>& data,
                                  std::vector<std::vector<float>>& scratch);
// The trained parameters' (Model::trained(): the model's, or the LoRA adapters with PEFT's names).
inline std::vector<TensorRef> hf_tensors(const Model& model, const Arena& arena,
                                         std::vector<std::vector<float>>& scratch) {
    return hf_tensors(model.param_specs(), arena, scratch);
}

// Maps a name found in a file to the table's name ("" = ignore it).
using CanonicalName = std::function<std::string(const std::string&)>;
// Copies every HF tensor of `source` into `arena` (fp32, laid out like `specs`). Throws CheckpointError
// listing every missing, unexpected, mis-shaped or non-float tensor (then nothing is written); `what`
// names the model in it ("llama", "LoRA adapter").
void load_hf(const std::vector<ParamSpec>& specs, const CanonicalName& canonical, std::string_view what, Arena& arena,
             const TensorSource& source);

// The model's name map: a language model's hub spellings (LanguageModel::hf_canonical_name), else the
// table's names as they are.
inline CanonicalName canonical_names(const Model& model) {
    const LanguageModel* lm = model.language_model();
    if (!lm) return [](const std::string& n) { return n; };
    return [lm](const std::string& n) { return lm->hf_canonical_name(n); };
}

// The trained parameters' layout (an fp32 arena like Model::params()) with the model's name map.
inline void load_hf(const Model& model, Arena& arena, const TensorSource& source) {
    load_hf(model.param_specs(), canonical_names(model), std::string(model.arch()) + " model", arena, source);
}

// The model's own weights (Model::base(), frozen or trained, on any device and dtype) from HF tensors.
void load_hf_params(Model& model, const TensorSource& source);
// The trained parameters (Model::trained()): the same as load_hf_params, or under LoRA the adapters.
void load_trained_params(Model& model, const TensorSource& source);

// The fp32 host copy of an fp32 `arena` (device parameters staged for a checkpoint or an export).
Arena host_copy(const Arena& arena);
// The fp32 host copy of a store's parameters, whatever their dtype (a frozen bf16 base included).
Arena host_f32_copy(const ParamStore& store);

}  // namespace llmt::models
