// Qwen3 (Hugging Face's Qwen3ForCausalLM): the LLaMA graph (models/llama.h) with an RMSNorm over each query
// and key head (q_norm, k_norm, head_dim wide) before RoPE, no q/k/v biases, and head_dim independent of
// hidden_size / num_attention_heads (Qwen3Config's default 128 when the file has none). Sliding-window
// layers (use_sliding_window true, layer_types other than full_attention) and attention_bias are refused.
#include <nlohmann/json.hpp>

#include "config/config.h"
#include "models/arch.h"
#include "models/hf_config.h"
#include "models/hf_fields.h"
#include "models/hf_llama_config.h"
#include "models/llama.h"

namespace llmt::models {

namespace {

void read_qwen3_config(const nlohmann::json& j, const std::string& path, HfConfig& c) {
    read_hf_llama_shape(j, path, c);
    const HfFields f(j, path);
    if (!f.has("head_dim")) {  // Qwen3Config's default, not hidden_size / num_attention_heads
        c.head_dim = 128;
        c.field_of["model.head_dim"] = "head_dim (absent: 128, Qwen3Config's default)";
    }
    f.refuse_unless(!f.bool_or("attention_bias", false), "attention_bias",
                    "llmtrain's Qwen3 has no q/k/v/o biases");
    f.refuse_unless(!f.bool_or("use_sliding_window", false), "use_sliding_window",
                    "llmtrain's Qwen3 attends to every earlier token in every layer");
    refuse_hf_layer_types(j, path, "full_attention", "llmtrain's Qwen3 has full attention in every layer");
}

void write_qwen3_config(const config::ModelConfig& m, const HfExportInfo&, int max_pos, nlohmann::json& j) {
    write_hf_llama_shape(m, max_pos, j);
    j["attention_bias"] = false;
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
    j["max_window_layers"] = m.n_layer;
}

}  // namespace

const ArchSpec& qwen3_arch() {
    static const ArchSpec spec = [] {
        ArchSpec s = llama_graph_spec("qwen3", [](const auto&, LlamaConfig& c) { c.qk_norm = true; });
        s.hf_class = "Qwen3ForCausalLM";
        s.read_hf_config = read_qwen3_config;
        s.write_hf_config = write_qwen3_config;
        return s;
    }();
    return spec;
}

}  // namespace llmt::models
