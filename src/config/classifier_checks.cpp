#include "config/classifier_checks.h"

#include <fmt/format.h>

#include <cmath>

#include "config/arch_table.h"
#include "config/schema.h"

namespace llmt::config {

namespace {

using nlohmann::ordered_json;

const ordered_json& at(const ordered_json& r, const std::string& path) { return r.at(schema_pointer(path)); }
bool is_default(const ordered_json& r, const std::string& path) {
    return at(r, path) == find_field(path)->default_value;
}

// Keys that every language model reads and no classifier does.
const std::vector<std::string>& lm_only_model_keys() {
    // (n_kv_head, d_ff and head_dim are derived from these unless written; the model checks compare them.)
    static const std::vector<std::string> keys = {
        "model.n_layer",  "model.n_head",         "model.d_model",  "model.block_size", "model.vocab_size",
        "model.vocab_pad_multiple", "model.tie_embeddings", "model.norm_eps"};
    return keys;
}

// The keys of the language-model families' sections (config/arch_table.cpp: RoPE, Mistral's window, ...),
// which no classifier reads: from the table, so a new family's section is refused under a classifier too.
const std::vector<std::string>& lm_section_keys() {
    static const std::vector<std::string> keys = [] {
        std::vector<std::string> out;
        for (const std::string& key : family_keys()) {
            bool image = false;
            for (const ArchEntry& e : arch_table()) image |= e.kind == ArchKind::kImageClassifier && e.reads(key);
            if (!image) out.push_back(key);
        }
        return out;
    }();
    return keys;
}

const std::vector<std::string>& classifier_only_keys() {
    static const std::vector<std::string> keys = {"model.image_size",    "model.in_channels",  "model.num_classes",
                                                  "model.conv_channels", "model.hidden_sizes", "trainer.conv_tf32"};
    return keys;
}

// "mlp or cnn": the families of one kind.
std::string names_of(ArchKind kind) {
    std::string s;
    std::vector<std::string> names;
    for (const ArchEntry& e : arch_table())
        if (e.kind == kind) names.push_back(e.name);
    for (std::size_t i = 0; i < names.size(); ++i)
        s += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
    return s;
}

void check_whole_numbers(const ordered_json& r, const std::string& key, std::vector<KeyProblem>& out) {
    for (const auto& x : at(r, key))
        if (x.get<double>() != std::floor(x.get<double>())) {
            out.push_back({key, fmt::format("expected whole numbers (widths), found {}", x.get<double>())});
            return;
        }
}

}  // namespace

const std::vector<std::string>& idx_only_data_keys() {
    static const std::vector<std::string> keys = {
        "data.train_images", "data.train_labels", "data.test_images",        "data.test_labels",
        "data.pixel_mean",   "data.pixel_std",    "data.augment.crop_padding", "data.augment.hflip"};
    return keys;
}

std::vector<KeyProblem> classifier_problems(const ordered_json& r, bool training) {
    std::vector<KeyProblem> out;
    const std::string arch = at(r, "model.arch");
    const std::string source = at(r, "data.source");
    const bool classifier = is_classifier_arch(arch);
    if (classifier) {
        for (const auto& key : lm_only_model_keys())
            if (!is_default(r, key))
                out.push_back({key, fmt::format("is read only by the language models ({}), and model.arch is "
                                                "{}; remove it",
                                                names_of(ArchKind::kLanguageModel), arch)});
        for (const auto& key : lm_section_keys())
            if (!is_default(r, key))
                out.push_back({key, fmt::format("is read only with model.arch {}, and model.arch is {}; remove it",
                                                families_reading(key), arch)});
        if (at(r, "model.init_from") != "scratch" && at(r, "model.init_from") != "")
            out.push_back(
                {"model.init_from", fmt::format("model.arch {} trains from scratch (Hugging Face weights are "
                                                "language models); remove it",
                                                arch)});
        if (at(r, "lora.r").get<int64_t>() > 0)
            out.push_back({"lora.r", fmt::format("LoRA adapts language models; model.arch is {}", arch)});
        if (training && source != "idx")
            out.push_back(
                {"data.source",
                 fmt::format("model.arch {} classifies images: data.source must be idx, found {}", arch, source)});
        // (Keys of another classifier's section: the loader's family-key check.)
        if (find_arch(arch)->reads("model.conv_channels")) {
            const auto& cc = at(r, "model.conv_channels");
            if (cc.empty()) out.push_back({"model.conv_channels", "cnn needs at least one convolution"});
            const int64_t size = at(r, "model.image_size").get<int64_t>();
            if (!cc.empty() && (size >> cc.size()) < 1)
                out.push_back({"model.conv_channels",
                               fmt::format("{} convolutions, each halving the image, leave nothing of a {}x{} image "
                                           "(model.image_size)",
                                           cc.size(), size, size)});
        }
        check_whole_numbers(r, "model.conv_channels", out);
        check_whole_numbers(r, "model.hidden_sizes", out);
    } else {
        for (const auto& key : classifier_only_keys())
            if (!is_default(r, key))
                out.push_back({key, fmt::format("is read only by the image classifiers (model.arch {}), and "
                                                "model.arch is {}; remove it",
                                                names_of(ArchKind::kImageClassifier), arch)});
        if (source == "idx")
            out.push_back({"model.arch", fmt::format("data.source idx holds images: model.arch must be {}, found {}",
                                                     names_of(ArchKind::kImageClassifier), arch)});
        if (at(r, "trainer.epochs").get<int64_t>() > 0)
            out.push_back({"trainer.epochs", "counts passes over an image set (data.source idx); language models "
                                             "train for trainer.max_steps"});
    }
    if (source != "idx")
        for (const auto& key : idx_only_data_keys())
            if (!is_default(r, key))
                out.push_back({key, fmt::format("is read only with data.source idx, and data.source is {}; remove it",
                                                source)});
    return out;
}

}  // namespace llmt::config
