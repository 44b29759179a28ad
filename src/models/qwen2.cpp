// Qwen2 / Qwen2.5 (Hugging Face's Qwen2ForCausalLM): the LLaMA graph (models/llama.h) with biases on the
// q, k and v projections; tied or untied embeddings and rope_theta (1e6 in Qwen2.5) as config.json says.
// Sliding-window layers (use_sliding_window true, layer_types other than full_attention) are refused.
#include <nlohmann/json.hpp>

#include "config/config.h"
#include "models/arch.h"
#include "models/hf_config.h"
#include "models/hf_fields.h"
#include "models/hf_llama_config.h"
#include "models/llama.h"

namespace llmt::models {

namespace {

void read_qwen2_config(const nlohmann::json& j, const std::string& path, HfConfig& c) {
    read_hf_llama_shape(j, path, c);
    const HfFields f(j, path);
    f.refuse_unless(!f.bool_or("use_sliding_window", false), "use_sliding_window",
                    "llmtrain's Qwen2 attends to every earlier token in every layer");
    refuse_hf_layer_types(j, path, "full_attention", "llmtrain's Qwen2 has full attention in every layer");
}

void write_qwen2_config(const config::ModelConfig& m, const HfExportInfo&, int max_pos, nlohmann::json& j) {
    write_hf_llama_shape(m, max_pos, j);
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
    j["max_window_layers"] = m.n_layer;
}

}  // namespace

const ArchSpec& qwen2_arch() {
    static const ArchSpec spec = [] {
        ArchSpec s = llama_graph_spec("qwen2", [](const auto&, LlamaConfig& c) { c.qkv_bias = true; });
        s.hf_class = "Qwen2ForCausalLM";
        s.read_hf_config = read_qwen2_config;
        s.write_hf_config = write_qwen2_config;
        return s;
    }();
    return spec;
}

}  // namespace llmt::models
