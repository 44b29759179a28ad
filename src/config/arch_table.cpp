#include "config/arch_table.h"

#include <algorithm>

#include "config/config.h"

namespace llmt::config {

namespace {

// The RoPE section (ModelConfig::rope): the base and the scaling group (its llama3 keys are also checked
// against the type by the loader).
const std::vector<std::string> kRopeKeys = {"model.rope_theta",
                                            "model.rope_scaling.type",
                                            "model.rope_scaling.factor",
                                            "model.rope_scaling.low_freq_factor",
                                            "model.rope_scaling.high_freq_factor",
                                            "model.rope_scaling.original_max_position_embeddings"};

std::vector<std::string> with(std::vector<std::string> keys, const std::string& key) {
    keys.push_back(key);
    return keys;
}

std::vector<ArchEntry> build() {
    const ArchKind lm = ArchKind::kLanguageModel, image = ArchKind::kImageClassifier;
    return {
        {"gpt2", lm, false, false, false, {}, "GPT-2 (learned positions, LayerNorm, GELU)"},
        {"llama", lm, true, true, true, kRopeKeys, "LLaMA (RoPE, RMSNorm, SwiGLU, grouped-query heads)"},
        {"qwen2", lm, true, true, true, kRopeKeys, "Qwen2/Qwen2.5 (LLaMA with q/k/v biases)"},
        {"qwen3", lm, true, true, true, kRopeKeys, "Qwen3 (LLaMA with per-head q/k RMSNorm)"},
        {"mistral", lm, true, true, true, with(kRopeKeys, "model.sliding_window"),
         "Mistral (LLaMA with sliding-window attention)"},
        {"mlp", image, false, false, false, {}, "image classifier, fully connected"},
        {"cnn", image, false, false, false, {"model.conv_channels", "trainer.conv_tf32"},
         "image classifier, convolutional"},
    };
}

}  // namespace

bool ArchEntry::reads(std::string_view key) const { return std::find(keys.begin(), keys.end(), key) != keys.end(); }

const std::vector<ArchEntry>& arch_table() {
    static const std::vector<ArchEntry> table = build();
    return table;
}

const ArchEntry* find_arch(std::string_view name) {
    for (const ArchEntry& e : arch_table())
        if (e.name == name) return &e;
    return nullptr;
}

std::vector<std::string> arch_names() {
    std::vector<std::string> out;
    for (const ArchEntry& e : arch_table()) out.push_back(e.name);
    return out;
}

const std::vector<std::string>& family_keys() {
    static const std::vector<std::string> keys = [] {
        std::vector<std::string> out;
        for (const ArchEntry& e : arch_table())
            for (const auto& k : e.keys)
                if (std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
        return out;
    }();
    return keys;
}

namespace {

std::string joined(const std::vector<std::string>& names) {
    std::string s;
    for (std::size_t i = 0; i < names.size(); ++i) {
        if (i > 0) s += i + 1 == names.size() ? " or " : ", ";
        s += names[i];
    }
    return s;
}

}  // namespace

std::string families_reading(std::string_view key) {
    std::vector<std::string> names;
    for (const ArchEntry& e : arch_table())
        if (e.reads(key)) names.push_back(e.name);
    return joined(names);
}

std::string families_with_rotary_positions() {
    std::vector<std::string> names;
    for (const ArchEntry& e : arch_table())
        if (e.rotary_positions) names.push_back(e.name);
    return joined(names);
}

bool is_classifier_arch(std::string_view name) {
    const ArchEntry* e = find_arch(name);
    return e && e->kind == ArchKind::kImageClassifier;
}

bool has_gated_mlp(std::string_view name) {
    const ArchEntry* e = find_arch(name);
    return e && e->gated_mlp;
}

bool has_rotary_positions(std::string_view name) {
    const ArchEntry* e = find_arch(name);
    return e && e->rotary_positions;
}

bool ModelConfig::is_classifier() const { return is_classifier_arch(arch); }

}  // namespace llmt::config
