#include "models/gpt2_io.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <set>

#include "core/error.h"
#include "core/fs.h"
#include "core/json_parse.h"

namespace llmt::models {

namespace {

Shape hf_shape(const ParamSpec& s) {
    Shape sh(s.shape.begin(), s.shape.end());
    if (s.hf_rows >= 0) sh[0] = s.hf_rows;
    if (s.hf_transposed) std::swap(sh[0], sh[1]);
    return sh;
}

// HF hub files for gpt2 name tensors without the "transformer." prefix ("h.0.attn.c_attn.weight").
std::string canonical_name(const std::string& n) {
    if (n.rfind("transformer.", 0) == 0 || n.rfind("lm_head.", 0) == 0) return n;
    return "transformer." + n;
}

bool is_mask_buffer(const std::string& n) {
    auto ends = [&](const char* s) {
        std::string suf(s);
        return n.size() >= suf.size() && n.compare(n.size() - suf.size(), suf.size(), suf) == 0;
    };
    return ends(".attn.bias") || ends(".attn.masked_bias");
}

}  // namespace

std::vector<TensorRef> gpt2_hf_tensors(const Gpt2& model, const Arena& arena,
                                       std::vector<std::vector<float>>& scratch) {
    std::vector<TensorRef> out;
    scratch.clear();
    scratch.reserve(model.param_specs().size());
    for (size_t i = 0; i < model.param_specs().size(); ++i) {
        const auto& s = model.param_specs()[i];
        const float* src = static_cast<const float*>(arena.view(i).data);
        Shape sh = hf_shape(s);
        if (s.hf_transposed) {
            const int64_t R = s.shape[0], K = s.shape[1];  // ours (R, K) -> HF (K, R)
            auto& buf = scratch.emplace_back(static_cast<size_t>(R * K));
            for (int64_t r = 0; r < R; ++r)
                for (int64_t k = 0; k < K; ++k) buf[static_cast<size_t>(k * R + r)] = src[r * K + k];
            out.push_back({s.name, StDType::kF32, sh, buf.data()});
        } else {
            out.push_back({s.name, StDType::kF32, sh, src});  // a row prefix when hf_rows < rows
        }
    }
    return out;
}

namespace {

// Hugging Face model directories and our checkpoints hold a config.json beside the weights; its
// layer_norm_epsilon is the eps the weights were trained with, which model.norm_eps must repeat (the
// tensors' shapes cannot tell). Compared in float, the precision both sides use (1e-05 there is 1e-5f here).
void check_norm_eps(const Gpt2Config& c, const std::string& weights_path) {
    const std::filesystem::path cfg = std::filesystem::path(weights_path).parent_path() / "config.json";
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

}  // namespace

void gpt2_load_hf(const Gpt2& model, Arena& arena, const SafetensorsFile& file) {
    check_norm_eps(model.config(), file.path());
    std::map<std::string, std::string> by_canonical;  // canonical -> name in file
    std::vector<std::string> problems;
    for (const auto& n : file.names()) {
        if (is_mask_buffer(n)) continue;
        by_canonical[canonical_name(n)] = n;
    }
    const auto& specs = model.param_specs();
    std::set<std::string> used;
    for (const auto& s : specs) {
        auto it = by_canonical.find(s.name);
        if (it == by_canonical.end()) {
            problems.push_back(fmt::format("missing tensor `{}` (expected shape {})", s.name, shape_str(hf_shape(s))));
            continue;
        }
        used.insert(it->first);
        const auto& info = file.info(it->second);
        Shape want = hf_shape(s);
        bool ok = info.shape.size() == want.size();
        if (ok && s.name == "transformer.wpe.weight") {
            ok = info.shape[0] >= want[0] && info.shape[1] == want[1];  // a longer table is cropped
        } else if (ok) {
            ok = info.shape == want;
        }
        if (!ok) problems.push_back(fmt::format("`{}`: expected shape {}, found {}", s.name, shape_str(want),
                                                shape_str(info.shape)));
        if (info.dtype != StDType::kF32 && info.dtype != StDType::kBF16 && info.dtype != StDType::kF16 &&
            info.dtype != StDType::kF64)
            problems.push_back(fmt::format("`{}`: expected a float dtype, found {}", s.name, st_dtype_name(info.dtype)));
    }
    for (const auto& [canon, name] : by_canonical) {
        if (used.count(canon)) continue;
        if (canon == "lm_head.weight" && model.config().tie_embeddings) continue;  // tied: same as wte
        problems.push_back(fmt::format("unexpected tensor `{}`", name));
    }
    if (!problems.empty()) {
        std::string msg = fmt::format("'{}' does not match the model ({} difference{}):", file.path(), problems.size(),
                                      problems.size() == 1 ? "" : "s");
        for (const auto& p : problems) msg += "\n  " + p;
        throw CheckpointError(msg);
    }
    for (size_t i = 0; i < specs.size(); ++i) {
        const auto& s = specs[i];
        const auto& info = file.info(by_canonical[s.name]);
        float* dst = static_cast<float*>(arena.view(i).data);
        std::vector<float> tmp(static_cast<size_t>(info.numel));
        file.read_f32(by_canonical[s.name], tmp.data(), info.shape);
        if (s.hf_transposed) {
            const int64_t R = s.shape[0], K = s.shape[1];
            for (int64_t r = 0; r < R; ++r)
                for (int64_t k = 0; k < K; ++k) dst[r * K + k] = tmp[static_cast<size_t>(k * R + r)];
        } else {
            int64_t row = 1;
            for (size_t d = 1; d < s.shape.size(); ++d) row *= s.shape[d];
            int64_t rows = s.hf_rows >= 0 ? s.hf_rows : s.shape[0];  // wpe: the first block_size rows
            std::memcpy(dst, tmp.data(), static_cast<size_t>(rows * row) * sizeof(float));
            std::memset(dst + rows * row, 0, static_cast<size_t>((s.shape[0] - rows) * row) * sizeof(float));
        }
    }
}

void gpt2_write_hf_config(const Gpt2Config& c, const std::filesystem::path& dir) {
    nlohmann::ordered_json j = {{"architectures", {"GPT2LMHeadModel"}},
                                {"model_type", "gpt2"},
                                {"vocab_size", c.vocab_size},
                                {"n_positions", c.block_size},
                                {"n_ctx", c.block_size},
                                {"n_embd", c.d_model},
                                {"n_layer", c.n_layer},
                                {"n_head", c.n_head},
                                {"n_inner", c.d_ff},
                                {"activation_function", "gelu_new"},
                                {"layer_norm_epsilon", c.norm_eps},
                                {"resid_pdrop", 0.0},
                                {"embd_pdrop", 0.0},
                                {"attn_pdrop", 0.0},
                                {"initializer_range", 0.02},
                                {"tie_word_embeddings", c.tie_embeddings},
                                {"bos_token_id", 50256},
                                {"eos_token_id", 50256},
                                {"torch_dtype", "float32"}};
    write_file_atomic(dir / "config.json", j.dump(2) + "\n");
}

void gpt2_save_hf(const Gpt2& model, const std::filesystem::path& path, const std::map<std::string, std::string>& md) {
    std::vector<std::vector<float>> scratch;
    auto meta = md;
    meta.emplace("format", "pt");  // what transformers checks for
    write_safetensors(path, gpt2_hf_tensors(model, model.params(), scratch), meta);
    gpt2_write_hf_config(model.config(), path.parent_path().empty() ? "." : path.parent_path());
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
