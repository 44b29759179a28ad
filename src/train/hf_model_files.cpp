#include "train/hf_model_files.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/error.h"
#include "core/fs.h"
#include "models/hf_resolve.h"

namespace llmt::train {

namespace fs = std::filesystem;

std::optional<std::string> run_tokenizer_spec(const config::Config& cfg, std::string* why) {
    const std::string& from = cfg.model.init_from;
    std::error_code ec;
    const bool from_dir = !from.empty() && from != "scratch" && fs::is_directory(from, ec);
    if (!from_dir || cfg.data.tokenizer != "gpt2") return cfg.data.tokenizer;
    if (data::has_hf_tokenizer_files(from)) return from;
    if (why)
        *why = fmt::format("model.init_from {} has no tokenizer files and data.tokenizer is the default; pass "
                           "--tokenizer or set data.tokenizer",
                           from);
    return std::nullopt;
}

HfModelFiles::HfModelFiles(const config::Config& cfg, std::string dtype, std::string tokenizer, bool strict)
    : model_(cfg.model), cfg_(cfg), dtype_(std::move(dtype)), spec_(std::move(tokenizer)), strict_(strict) {}

void HfModelFiles::resolve() {
    if (resolved_) return;
    resolved_ = true;
    info_ = models::hf_export_info(cfg_, dtype_);
    if (spec_.empty()) {
        const std::optional<std::string> s = run_tokenizer_spec(cfg_, &why_none_);
        if (!s) return;
        spec_ = *s;
    }
    try {
        data::HfTokenizerFiles files = data::HfTokenizerFiles::from_spec(spec_, model_.block_size);
        // A tokenizer with ids the model has no row for is not the model's (the vocabulary may be padded
        // above the tokenizer's, never below).
        if (files.vocab_size() > static_cast<std::size_t>(model_.vocab_size))
            throw InputError(
                fmt::format("tokenizer {} has {} ids but the model's vocabulary is {} (model.vocab_size); "
                            "it is not this model's tokenizer",
                            spec_, files.vocab_size(), model_.vocab_size));
        tok_.emplace(std::move(files));
    } catch (const Error& e) {
        if (strict_) throw;
        why_none_ = e.what();
        return;
    }
    // The ids of the config.json the run started from are the model's own; else the tokenizer's.
    const data::HfSpecialIds& ids = tok_->ids();
    if (info_.bos_token_id.empty()) info_.bos_token_id = ids.bos_token_id;
    if (info_.eos_token_id.empty()) info_.eos_token_id = ids.eos_token_id;
    if (info_.pad_token_id.empty()) info_.pad_token_id = ids.pad_token_id;
    generation_eos_ = info_.eos_token_id;
    for (int64_t id : ids.generation_eos_token_id)
        if (std::find(generation_eos_.begin(), generation_eos_.end(), id) == generation_eos_.end())
            generation_eos_.push_back(id);
}

const models::HfExportInfo& HfModelFiles::info() {
    resolve();
    return info_;
}

void HfModelFiles::write(const fs::path& dir) {
    resolve();
    write_file_atomic(dir / "config.json", models::hf_config_json(model_, info_).dump(2) + "\n");
    nlohmann::json gen = models::hf_generation_config_json(info_);
    if (generation_eos_.size() > 1) gen["eos_token_id"] = generation_eos_;  // with the chat template's end of turn
    write_file_atomic(dir / "generation_config.json", gen.dump(2) + "\n");
    if (tok_) tok_->write(dir);
}

std::optional<std::string> HfModelFiles::take_note() {
    if (noted_ || !resolved_ || tok_) return std::nullopt;
    noted_ = true;
    return describe();
}

std::string HfModelFiles::describe() {
    resolve();
    if (!tok_) return "no tokenizer files (" + why_none_ + ")";
    return fmt::format("{} from {}", fmt::join(tok_->names(), ", "), spec_);
}

}  // namespace llmt::train
