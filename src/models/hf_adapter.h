// Our parameters <-> Hugging Face tensors, for every architecture, driven by the parameter table: each
// ParamSpec names the HF tensors holding it (several for a fused tensor: LLaMA's q|k|v, gate|up), whether
// HF stores it transposed (GPT-2's Conv1D), padding rows HF does not have, and position tables that may
// be cropped. The architecture adds only its hub spellings (Model::hf_canonical_name).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/safetensors.h"
#include "models/hf_weights.h"
#include "models/model.h"

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
    void read_f32(std::string_view name, float* dst, const Shape& shape) const override { w_.read_f32(name, dst, shape); }

private:
    const HfWeights& w_;
};

// The HF tensors of `arena` (the parameters, or a same-layout arena such as the gradients), fp32, in
// table order. Refs point into `arena` or into `scratch` (transposed copies), which must outlive their use.
std::vector<TensorRef> hf_tensors(const Model& model, const Arena& arena, std::vector<std::vector<float>>& scratch);

// Copies every HF tensor of `source` into `arena` (the model's layout). Throws CheckpointError listing
// every missing, unexpected, mis-shaped or non-float tensor (then nothing is written).
void load_hf(const Model& model, Arena& arena, const TensorSource& source);

// load_hf into the model's parameters on any device (staged through host memory for a GPU), then the
// bf16 compute copy refreshed.
void load_hf_params(Model& model, const TensorSource& source);

// The fp32 host copy of `arena` (device parameters staged for a checkpoint or an export).
Arena host_copy(const Arena& arena);

}  // namespace llmt::models
