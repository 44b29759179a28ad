#include "cli/generation_stop.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"
#include "core/json_parse.h"
#include "data/tokenizer/hf_tokenizer_files.h"
#include "train/hf_model_files.h"

namespace llmt::cli {

namespace fs = std::filesystem;

fs::path tokenizer_directory(const std::string& spec) {
    std::error_code ec;
    const fs::path p(spec);
    if (spec == "gpt2") return {};
    if (fs::is_directory(p, ec)) return p;
    if (p.filename() == "tokenizer.json") return p.parent_path().empty() ? fs::path(".") : p.parent_path();
    return {};
}

std::string text_tokenizer(const std::string& command, const std::string& tokenizer, const std::string& model_dir,
                           const config::Config& cfg) {
    if (!tokenizer.empty()) return tokenizer;
    if (!model_dir.empty()) {
        if (data::has_hf_tokenizer_files(model_dir)) return model_dir;
        throw UsageError(
            fmt::format("{}: the model directory {} has no tokenizer files (tokenizer.json, or vocab.json "
                        "+ merges.txt), so text cannot go in or out\nhint: pass --tokenizer SPEC (the "
                        "tokenizer the model was trained with), or --prompt-ids for ids in and out",
                        command, model_dir));
    }
    std::string why;
    if (const std::optional<std::string> spec = train::run_tokenizer_spec(cfg, &why)) return *spec;
    throw UsageError(fmt::format("{}: the checkpoint's tokenizer is unknown: {}", command, why));
}

bool is_checkpoint_path(const std::string& path) {
    std::error_code ec;
    const fs::path m(path);
    return fs::exists(m / "checkpoints", ec) || fs::exists(m / "latest", ec) || fs::exists(m / "state.json", ec);
}

std::vector<uint32_t> generation_stop_ids(const data::Tokenizer& tok, const fs::path& dir,
                                          const std::vector<uint32_t>& extra) {
    std::vector<uint32_t> ids = {tok.eot_token()};
    auto add = [&](uint32_t id) {
        if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
    };
    std::error_code ec;
    const fs::path file = dir / "generation_config.json";
    if (!dir.empty() && fs::is_regular_file(file, ec)) {
        const nlohmann::json j = parse_json(read_file(file.string()), file.string());
        auto it = j.is_object() ? j.find("eos_token_id") : j.end();
        if (it != j.end() && !it->is_null()) {
            const nlohmann::json list = it->is_array() ? *it : nlohmann::json::array({*it});
            for (const auto& v : list) {
                if (!v.is_number_unsigned() || v.get<uint64_t>() >= tok.vocab_size())
                    throw FormatError(
                        fmt::format("{}: eos_token_id: {} is not a token id of the tokenizer (vocabulary "
                                    "size {})",
                                    file.string(), v.dump(), tok.vocab_size()));
                add(v.get<uint32_t>());
            }
        }
    }
    for (uint32_t id : extra) add(id);
    return ids;
}

std::string describe_ids(const data::Tokenizer& tok, const std::vector<uint32_t>& ids) {
    std::string s;
    for (uint32_t id : ids) {
        if (!s.empty()) s += ", ";
        s += fmt::format("{} ({})", tok.token_bytes(id), id);
    }
    return s;
}

void write_out(const std::string& s) {
    if (s.empty()) return;
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
}

}  // namespace llmt::cli
