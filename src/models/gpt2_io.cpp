#include "models/gpt2_io.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>


#include "core/error.h"
#include "core/fs.h"
#include "core/json_parse.h"

namespace llmt::models {

// Hugging Face model directories and our checkpoints hold a config.json beside the weights; its
// layer_norm_epsilon is the eps the weights were trained with, which model.norm_eps must repeat (the
// tensors' shapes cannot tell). Compared in float, the precision both sides use (1e-05 there is 1e-5f here).
void gpt2_check_norm_eps(const Gpt2Config& c, const std::filesystem::path& weights_path) {
    const std::filesystem::path cfg = weights_path.parent_path() / "config.json";
    std::error_code ec;
    if (!std::filesystem::is_regular_file(cfg, ec)) return;
    // Not a config we know how to read (or over the bounded parser's limits): the tensors' shapes are
    // still checked.
    const auto parsed = try_parse_json(read_file(cfg, 1 << 20));
    if (!parsed) return;
    const nlohmann::json& j = *parsed;
    if (!j.is_object() || !j.contains("layer_norm_epsilon") || !j["layer_norm_epsilon"].is_number()) return;
    const float eps = j["layer_norm_epsilon"].get<float>();
    if (eps != c.norm_eps)
        throw InputError(fmt::format("model.norm_eps: {} but '{}' says layer_norm_epsilon {}, the eps these weights "
                                     "were trained with; set model.norm_eps: {}",
                                     c.norm_eps, cfg.string(), eps, eps));
}


std::filesystem::path gpt2_resolve_init_from(const std::string& init_from) {
    std::filesystem::path p(init_from);
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
        if (std::filesystem::exists(p / "model.safetensors", ec)) return p / "model.safetensors";
        throw InputError(fmt::format("model.init_from: directory '{}' has no model.safetensors", init_from));
    }
    if (!std::filesystem::exists(p, ec))
        throw InputError(fmt::format("model.init_from: '{}' does not exist (expected a .safetensors file or a "
                                     "directory with model.safetensors)",
                                     init_from));
    return p;
}

}  // namespace llmt::models
