// One row of a model's parameter table: drives the arena layout, initialisation, which tensors train,
// the optimizer's decay groups, and where the tensor lives in Hugging Face's files (names, transposes,
// fused tensors split into several HF tensors). models/hf_adapter.h reads and writes through it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace llmt::models {

// kKaimingUniform: U(-1/sqrt(in), 1/sqrt(in)) for an (out, in) matrix, torch.nn.Linear's default (LoRA's A).
enum class ParamInit { kNormal, kNormalResidual, kZeros, kOnes, kKaimingUniform };
enum class ParamKind { kWeight, kBias, kNorm, kEmbedding };

// A block of consecutive rows of one of our tensors that Hugging Face stores as its own tensor: LLaMA's
// fused qkv_proj is HF's q_proj, k_proj and v_proj, one part each, in that order.
struct HfPart {
    std::string name;  // HF name, e.g. "model.layers.0.self_attn.q_proj.weight"
    int64_t rows = 0;  // rows of ours it holds (after undoing hf_transposed); the sum over parts <= shape[0]
};

struct ParamSpec {
    std::string name;            // our name (the HF name when not fused), e.g. "transformer.h.0.attn.c_attn.weight"
    std::vector<int64_t> shape;  // our layout (nn.Linear: (out, in))
    ParamInit init = ParamInit::kZeros;
    ParamKind kind = ParamKind::kWeight;
    // Whether the optimizer updates it (the trainer gives AdamW trainable tensors only; LoRA freezes the
    // base model). Gradients are still computed for every tensor.
    bool trainable = true;
    bool hf_transposed = false;  // HF stores it transposed (GPT-2's Conv1D: (in, out))
    // HF tensors holding it, in row order. Rows of ours past the parts' sum are padding (the vocabulary
    // padded to a multiple of 64/128): zero on load, not written, not counted as parameters.
    std::vector<HfPart> hf;
    // The HF tensor may have more rows than ours; the first are taken (GPT-2's position table when
    // model.block_size is below n_positions).
    bool hf_crop_rows = false;

    static ParamSpec make(std::string name, std::vector<int64_t> shape, ParamInit init, ParamKind kind) {
        ParamSpec s;
        s.name = std::move(name);
        s.shape = std::move(shape);
        s.init = init;
        s.kind = kind;
        return s;
    }

    // Rows that hold real parameters (the padding excluded).
    int64_t live_rows() const {
        int64_t r = 0;
        for (const auto& p : hf) r += p.rows;
        return r;
    }
};

}  // namespace llmt::models
