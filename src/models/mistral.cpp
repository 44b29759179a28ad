// Mistral (Hugging Face's MistralForCausalLM): the LLaMA graph (models/llama.h) with a sliding window over
// the keys, sliding_window W from config.json (a number, or null for none) with transformers' rule (query i
// sees key j iff i - W < j <= i) in training and decoding; head_dim as config.json sets it, which may differ
// from hidden_size / num_attention_heads.
#include <nlohmann/json.hpp>

#include "config/config.h"
#include "models/arch.h"
#include "models/hf_config.h"
#include "models/hf_fields.h"
#include "models/hf_llama_config.h"
#include "models/llama.h"

namespace llmt::models {

namespace {

void read_mistral_config(const nlohmann::json& j, const std::string& path, HfConfig& c) {
    read_hf_llama_shape(j, path, c);
    const HfFields f(j, path);
    f.refuse_unless(!f.bool_or("attention_bias", false), "attention_bias", "llmtrain's Mistral has no biases");
    const int window = f.has("sliding_window") ? static_cast<int>(f.integer("sliding_window")) : 0;
    c.family_values.push_back({"model.sliding_window", window});
    c.field_of["model.sliding_window"] = f.has("sliding_window") ? "sliding_window" : "sliding_window (null: none)";
    if (window > 0) {
        refuse_hf_layer_types(j, path, "sliding_attention",
                              "llmtrain's Mistral has the same sliding window in every layer");
    } else {
        refuse_hf_layer_types(j, path, "full_attention", "sliding_window is null: full attention in every layer");
    }
}

void write_mistral_config(const config::ModelConfig& m, const HfExportInfo&, int max_pos, nlohmann::json& j) {
    write_hf_llama_shape(m, max_pos, j);
    const int window = m.mistral.sliding_window;
    j["sliding_window"] = window > 0 ? nlohmann::json(window) : nlohmann::json(nullptr);
}

}  // namespace

const ArchSpec& mistral_arch() {
    // The window is the family's config section (model.sliding_window), read here only.
    static const ArchSpec spec = [] {
        ArchSpec s = llama_graph_spec("mistral", [](const config::ModelConfig& m, LlamaConfig& c) {
            c.sliding_window = m.mistral.sliding_window;
        });
        s.hf_class = "MistralForCausalLM";
        s.read_hf_config = read_mistral_config;
        s.write_hf_config = write_mistral_config;
        return s;
    }();
    return spec;
}

}  // namespace llmt::models
