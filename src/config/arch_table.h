// The model families this build knows, as the config layer sees them: each family's name (model.arch),
// its kind, the keys of its config section (the keys only some families read) and the facts the other
// layers ask of a family without building it (rotary positions for packed rows). The models layer
// registers the rest of each family (graph, tensor table, config.json; models/arch.h) under the same
// name. The table lives here because config sits below models: the schema's model.arch choices and the
// loader's per-family key checks come from it (docs/architecture.md "Model families").
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace llmt::config {

enum class ArchKind { kLanguageModel, kImageClassifier };

struct ArchEntry {
    std::string name;  // model.arch
    ArchKind kind = ArchKind::kLanguageModel;
    // RoPE positions: packed rows restart their position ids (data.source chat, data.packing).
    bool rotary_positions = false;
    // Grouped-query heads: model.n_kv_head may divide model.n_head and model.head_dim may differ from
    // model.d_model / model.n_head. Without it both must be their derived values.
    bool grouped_query = false;
    // A gated MLP (SwiGLU: one gate|up projection 2 x model.d_ff wide); else GELU's up projection d_ff wide.
    bool gated_mlp = false;
    // The family-specific keys it reads (any section). A key some family lists is refused, when not at
    // its default, under a family that does not list it.
    std::vector<std::string> keys;
    std::string doc;  // a few words for the schema's doc of model.arch

    bool reads(std::string_view key) const;
};

// Every family, in the order the schema lists them.
const std::vector<ArchEntry>& arch_table();
// The family named `name`, or nullptr.
const ArchEntry* find_arch(std::string_view name);
// The names, in table order.
std::vector<std::string> arch_names();
// The keys some family lists, each once.
const std::vector<std::string>& family_keys();
// "llama, qwen2 or mistral": the families that read `key`, for messages.
std::string families_reading(std::string_view key);
// "llama, qwen2, qwen3 or mistral": the families with rotary positions, for messages.
std::string families_with_rotary_positions();
// Whether `name` is an image classifier (false for unknown names).
bool is_classifier_arch(std::string_view name);
// Whether `name` has rotary positions (false for unknown names).
bool has_rotary_positions(std::string_view name);
// Whether `name`'s MLP is gated (false for unknown names).
bool has_gated_mlp(std::string_view name);

}  // namespace llmt::config
