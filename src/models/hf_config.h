// Hugging Face config.json, in and out: what a model directory's config.json says about the model
// (LlamaConfig or GPT2Config, as transformers 4.x and 5.x write them), how it fills the model keys of a
// config the user left unwritten, and the config.json / generation_config.json we export.
// docs/formats/hf_directories.md describes what is read, written and refused.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace llmt::config {
struct Config;
struct ModelConfig;
}  // namespace llmt::config

namespace llmt::models {

// One model's config.json, in our terms. Every field is set (transformers' defaults where the file omits
// an optional field, e.g. num_key_value_heads = num_attention_heads).
struct HfConfig {
    std::string path;        // the file, for messages
    std::string model_type;  // as written ("llama", "qwen2", ...); a registered family's (models/arch.h)
    std::string arch;        // our model.arch for it
    int hidden_size = 0, num_hidden_layers = 0, num_attention_heads = 0, num_key_value_heads = 0;
    int intermediate_size = 0;  // gpt2: n_inner, 4 x n_embd when null
    int head_dim = 0;           // hidden_size / num_attention_heads unless the file says otherwise
    int max_position_embeddings = 0;  // gpt2: n_positions
    int vocab_size = 0;
    double norm_eps = 0;  // llama: rms_norm_eps (default 1e-6); gpt2: layer_norm_epsilon (default 1e-5)
    bool tie_word_embeddings = false;  // absent: llama false, gpt2 true (transformers' class defaults)
    // The families on the LLaMA graph: RoPE base and scaling (4.x: rope_theta + rope_scaling; 5.x:
    // rope_parameters), as the model section's RoPE keys (config::ModelConfig::Rope) in config.json's
    // precision; the scaling fields are set with type llama3 only.
    struct Rope {
        double theta = 10000.0;
        struct Scaling {
            std::string type = "none";  // "none" (HF "default") | "llama3"
            double factor = 0, low_freq_factor = 0, high_freq_factor = 0;
            int original_max_position_embeddings = 0;
        } scaling;
    } rope;
    std::vector<int64_t> bos_token_id, eos_token_id;  // an int in the file is one element; null is empty
    // The family's defaults where the file has no bos/eos ids (GPT2Config's 50256).
    std::vector<int64_t> default_bos_token_id, default_eos_token_id;
    // Our keys the family's config.json sets beyond the shape keys every family has (model.rope_theta,
    // model.rope_scaling.*, model.sliding_window), with their values in the resolved config's JSON types.
    std::vector<std::pair<std::string, nlohmann::json>> family_values;
    std::string dtype;  // 5.x dtype / 4.x torch_dtype ("bfloat16", ...), "" when absent
    // Where each of our model keys came from in the file ("num_hidden_layers",
    // "rope_parameters.rope_theta", "n_inner (null: 4 x n_embd)"), for messages.
    std::map<std::string, std::string> field_of;
};

// Parses config.json text. `path` names the file in messages. Throws FormatError naming the file and
// the field for malformed JSON, a missing shape field, a wrong type or a value out of range, and for
// what llmtrain cannot compute: a model_type no registered family reads, and each family's refusals
// (its reader in its file; docs/hf_models.md lists them).
HfConfig parse_hf_config(std::string_view json_text, const std::string& path);
// Reads and parses `file` (at most 1 MiB). Throws IoError when it cannot be read, and as above.
HfConfig read_hf_config(const std::filesystem::path& file);

// Takes the model keys the user did not write (cfg.written) from `hf`, and compares the written ones:
// arch, n_layer, n_head, n_kv_head, d_model, d_ff, head_dim, vocab_size, tie_embeddings, norm_eps,
// and the family's section keys (family_values: the RoPE keys, Mistral's model.sliding_window).
// model.block_size may be written up to max_position_embeddings (unwritten: max_position_embeddings).
// vocab_pad_multiple, dropout and init_from stay ours. Keeps cfg.resolved in step (checkpoints store it),
// re-runs the model checks (config/loader.h recheck_model_section) and refreshes cfg.model.
// Throws ConfigError listing every disagreement, each naming both sides ("model.n_layer: 16 in
// x.yaml:3:3 but num_hidden_layers: 22 in DIR/config.json"), or a config.json value outside the key's
// range. Call it from a command (train, eval, export, estimate) after the access policy allowed the
// path: config parsing never reads files that init_from names.
void apply_hf_config(config::Config& cfg, const HfConfig& hf);

// What an export knows beyond the model keys.
struct HfExportInfo {
    std::string dtype = "float32";     // the tensors' dtype in transformers' spelling: float32 | bfloat16
    int max_position_embeddings = 0;   // 0: model.block_size (llama: pass the original's, RoPE has no table)
    std::vector<int64_t> bos_token_id, eos_token_id;  // empty: null in config.json, absent in generation
    std::vector<int64_t> pad_token_id;                // the same
};

// config.json for `m` as transformers 5.x writes it (keys sorted), readable by 4.x too: llama writes
// rope_parameters (5.x) and the legacy rope_theta + rope_scaling (4.x; 5.x reads them as the same values),
// dtype (5.x) and torch_dtype (4.x). The family's fields come from its ArchSpec (models/arch.h). Throws
// InputError for an arch without a config.json (the image classifiers).
nlohmann::json hf_config_json(const config::ModelConfig& m, const HfExportInfo& info);

// generation_config.json: bos/eos/pad token ids, as transformers derives it from a model config.
nlohmann::json hf_generation_config_json(const HfExportInfo& info);

}  // namespace llmt::models
