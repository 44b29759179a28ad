// What a Hugging Face model directory holds beside its weights, for a run's checkpoints, `llmtrain export`
// and `llmtrain merge` alike: config.json, generation_config.json and the run's tokenizer files, with the
// tokenizer's bos/eos/pad ids in both JSON files (unless the model directory the run started from
// recorded its own). docs/formats/hf_directories.md.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "config/config.h"
#include "data/tokenizer/hf_tokenizer_files.h"
#include "models/hf_config.h"

namespace llmt::train {

// The tokenizer a run's text went through: data.tokenizer, except that a run from a model directory with
// tokenizer files (model.init_from) and data.tokenizer left at "gpt2" has that directory's. nullopt (with
// `why` set) when it is unknown: a model directory without tokenizer files and data.tokenizer left at
// its default, since such a run read pre-tokenised shards of any vocabulary.
std::optional<std::string> run_tokenizer_spec(const config::Config& cfg, std::string* why);

// Not thread-safe. The tokenizer is loaded on the first write() or info() (a GPT-2 tokenizer's merges are
// recovered then, about a second), not when constructed.
class HfModelFiles {
public:
    // `cfg` with model.init_from's config.json applied (models::prepare_init_from); `dtype` the tensors'
    // (float32 | bfloat16); `tokenizer`: a spec that replaces run_tokenizer_spec(cfg). With `strict`, a
    // tokenizer that cannot be loaded or that has more ids than the model is an error (InputError naming
    // it); without, the directory is written without tokenizer files and describe() says why.
    HfModelFiles(const config::Config& cfg, std::string dtype, std::string tokenizer = "", bool strict = false);

    // config.json, generation_config.json and the tokenizer files into `dir`. Throws IoError, and as above.
    void write(const std::filesystem::path& dir);
    // The ids and dtype written into config.json and generation_config.json.
    const models::HfExportInfo& info();
    // "tokenizer.json, tokenizer_config.json from data/tokenizers/llama3", or why no tokenizer was written.
    std::string describe();
    // Once, after the first write() without tokenizer files: describe(), for the run's log.
    std::optional<std::string> take_note();

private:
    void resolve();

    config::ModelConfig model_;
    config::Config cfg_;
    std::string dtype_, spec_, why_none_;
    bool strict_ = false, resolved_ = false, noted_ = false;
    models::HfExportInfo info_;
    std::optional<data::HfTokenizerFiles> tok_;
    std::vector<int64_t> generation_eos_;
};

}  // namespace llmt::train
