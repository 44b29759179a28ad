// One row of a model's parameter table: drives the arena layout, initialisation, checkpoint names
// (Hugging Face's), the layout conversion to HF's Conv1D, and the optimizer's decay groups.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace llmt::models {

enum class ParamInit { kNormal, kNormalResidual, kZeros, kOnes };
enum class ParamKind { kWeight, kBias, kNorm, kEmbedding };

struct ParamSpec {
    std::string name;            // HF name, e.g. "transformer.h.0.attn.c_attn.weight"
    std::vector<int64_t> shape;  // our layout (nn.Linear: (out, in))
    ParamInit init = ParamInit::kZeros;
    ParamKind kind = ParamKind::kWeight;
    bool hf_transposed = false;  // HF stores it transposed (GPT-2's Conv1D: (in, out))
    int64_t hf_rows = -1;        // rows stored in HF files when fewer than ours (wte without padding)
};

}  // namespace llmt::models
