// `llmtrain generate`: sample text from a checkpoint with the model's KV-cache decoder (models/model.h)
// and the seeded sampler (models/sampler.h), streaming the text to stdout token by token.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <climits>
#include <cstdlib>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cli/checkpoint_model.h"
#include "cli/command.h"
#include "cli/generation_stop.h"
#include "cli/hub_revision.h"
#include "cli/sampling_options.h"
#include "core/check.h"
#include "core/error.h"
#include "data/tokenizer/tokenizer.h"
#include "kernels/ops.h"
#include "models/hf_resolve.h"
#include "models/language_model.h"
#include "models/sampler.h"
#include "models/utf8_stream.h"

namespace llmt::cli {

namespace {

struct GenerateOptions {
    std::string checkpoint, model_dir, config, prompt, prompt_ids, tokenizer, revision = "main";
    std::vector<std::string> sets;
    SamplingOptions sampling{.max_new_tokens = 100,
                             .sampler = {.temperature = 0.8f, .top_k = 40, .seed = 1337, .top_p = 1.f}};
};

// "1,17,300" -> ids; UsageError naming --prompt-ids otherwise.
std::vector<int32_t> parse_ids(const std::string& text) {
    std::vector<int32_t> ids;
    size_t p = 0;
    while (p <= text.size()) {
        const size_t q = std::min(text.find(',', p), text.size());
        const std::string item = text.substr(p, q - p);
        char* end = nullptr;
        const long v = std::strtol(item.c_str(), &end, 10);
        LLMT_CHECK_AS(UsageError, !item.empty() && end && *end == '\0' && v >= 0 && v <= INT32_MAX,
                      "generate: --prompt-ids: expected comma-separated token ids, found '{}' in '{}'", item, text);
        ids.push_back(static_cast<int32_t>(v));
        p = q + 1;
    }
    return ids;
}

// How tokens go in and out: text through a tokenizer, or ids as they are (--prompt-ids: a model without
// tokenizer files, and comparisons with transformers' generate).
class TokenIo {
public:
    // model_dir: a Hugging Face model directory (--model), empty for a checkpoint of ours; source: the
    // directory the weights came from (its generation_config.json's eos ids stop generation).
    TokenIo(const GenerateOptions& o, const std::string& model_dir, const std::string& source,
            const config::Config& cfg)
        : ids_mode_(!o.prompt_ids.empty()) {
        // Ids in, ids out need no tokenizer; text needs the model's own (never a silent GPT-2).
        const std::string spec = ids_mode_ ? std::string() : text_tokenizer("generate", o.tokenizer, model_dir, cfg);
        if (!ids_mode_) tok_.emplace(data::Tokenizer::load(spec));
        // The model's end-of-sequence ids (config.json's eos_token_id), and the tokenizer's end of text.
        for (int64_t id : models::hf_export_info(cfg, "float32").eos_token_id)
            stop_.push_back(static_cast<int32_t>(id));
        if (tok_) {
            // Every eos_token_id of generation_config.json in the model directory and in the tokenizer's
            // (Llama 3 Instruct: <|end_of_text|> and <|eot_id|>, the turn end a fine-tuned chat model emits).
            for (const std::filesystem::path& dir : {std::filesystem::path(source), tokenizer_directory(spec)})
                for (uint32_t id : generation_stop_ids(*tok_, dir)) stop_.push_back(static_cast<int32_t>(id));
        }
    }
    std::vector<int32_t> prompt(const GenerateOptions& o) const {
        if (ids_mode_) return parse_ids(o.prompt_ids);
        // The tokenizer.json post-processor's tokens first (Llama 3.1: <|begin_of_text|>), as transformers'
        // encode(add_special_tokens=True) gives them; an empty prompt without them starts from end-of-text.
        std::vector<int32_t> seq;
        for (uint32_t id : tok_->prefix_tokens()) seq.push_back(static_cast<int32_t>(id));
        if (o.prompt.empty() && seq.empty()) return {static_cast<int32_t>(tok_->eot_token())};
        for (uint32_t id : tok_->encode(o.prompt, true)) seq.push_back(static_cast<int32_t>(id));
        return seq;
    }
    // "<|eot_id|>" for a stop id (the id itself without a tokenizer).
    std::string describe(int32_t id) const {
        return tok_ ? std::string(tok_->token_bytes(static_cast<uint32_t>(id))) : std::to_string(id);
    }
    // Ids the model may predict: also ids the tokenizer can print.
    int vocab(int model_vocab) const {
        return tok_ ? std::min<int>(model_vocab, static_cast<int>(tok_->vocab_size())) : model_vocab;
    }
    bool stops(int32_t id) const { return std::find(stop_.begin(), stop_.end(), id) != stop_.end(); }
    void begin(const GenerateOptions& o, const std::vector<int32_t>& prompt) {
        if (!ids_mode_) return write_out(o.prompt);
        for (size_t i = 0; i < prompt.size(); ++i) write_out(fmt::format("{}{}", i ? " " : "", prompt[i]));
    }
    void emit(int32_t id) {
        if (ids_mode_) return write_out(fmt::format(" {}", id));
        write_out(text_.take(tok_->token_bytes(static_cast<uint32_t>(id))));
    }
    void end() {
        if (!ids_mode_) write_out(text_.finish());
        write_out("\n");
    }

private:
    bool ids_mode_ = false;
    std::optional<data::Tokenizer> tok_;
    std::vector<int32_t> stop_;
    models::Utf8Stream text_;
};

void run_generate(const GenerateOptions& o) {
    const int max_new_tokens = o.sampling.max_new_tokens;
    LLMT_CHECK(max_new_tokens >= 0, "generate: --max-new-tokens must be >= 0, got {}", max_new_tokens);
    LLMT_CHECK_AS(UsageError, o.checkpoint.empty() != o.model_dir.empty(),
                  "generate: give exactly one of --checkpoint (a run of ours) and --model (a Hugging Face model "
                  "directory)");
    LLMT_CHECK_AS(UsageError, o.prompt.empty() || o.prompt_ids.empty(),
                  "generate: give --prompt or --prompt-ids, not both");
    // --model on a run of ours (or its checkpoints) reads it as --checkpoint would.
    const bool ours = !o.model_dir.empty() && is_checkpoint_path(o.model_dir);
    const std::string checkpoint = ours ? o.model_dir : o.checkpoint;
    const std::string model_dir = ours ? std::string() : o.model_dir;
    const LoadedModel loaded = model_dir.empty() ? load_checkpoint_model("generate", checkpoint, o.config, o.sets)
                                                 : load_model_dir("generate", model_dir, o.sets);
    const config::Config& cfg = loaded.config;
    const models::Model& model = *loaded.model;
    kernels::set_cpu_threads(cfg.run.threads);
    const models::ModelDims& mc = model.dims();

    TokenIo io(o, model_dir, loaded.source, cfg);
    std::vector<int32_t> seq = io.prompt(o);
    LLMT_CHECK(static_cast<int>(seq.size()) <= mc.block_size,
               "generate: the prompt is {} tokens, longer than the model's context (model.block_size {})", seq.size(),
               mc.block_size);
    for (int32_t id : seq)
        LLMT_CHECK(id < mc.vocab_size, "generate: prompt token id {} is outside the model's vocabulary [0, {})", id,
                   mc.vocab_size);
    models::Sampler sampler(o.sampling.sampler, io.vocab(mc.vocab_size));
    const std::unique_ptr<models::Decoder> decoder = models::as_language_model(model).decoder();
    models::Decoder& dec = *decoder;
    io.begin(o, seq);

    const auto t0 = std::chrono::steady_clock::now();
    const float* logits = dec.prefill(seq);
    int generated = 0, reprimes = 0;
    int32_t stopped_at = -1;
    while (generated < max_new_tokens) {
        int32_t id = sampler.sample(logits);
        ++generated;
        if (io.stops(id)) {
            stopped_at = id;
            break;
        }
        seq.push_back(id);
        io.emit(id);
        if (generated == max_new_tokens) break;
        if (dec.position() == dec.capacity()) {
            // Context full: start again from the newest half (one prefill per block_size/2 tokens,
            // instead of nanoGPT's full forward over the last block_size tokens at every step).
            const size_t keep = static_cast<size_t>(std::max(1, dec.capacity() / 2));
            logits = dec.prefill(std::span<const int32_t>(seq.data() + seq.size() - keep, keep));
            ++reprimes;
        } else {
            logits = dec.step(id);
        }
    }
    io.end();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print(stderr, "generate: {} tokens in {:.2f} s ({:.1f} tokens/s){}{}; {} {}\n", generated, s,
               s > 0 ? generated / s : 0.0, stopped_at >= 0 ? ", stopped at " + io.describe(stopped_at) : "",
               reprimes ? fmt::format(", context re-primed {}x", reprimes) : "",
               model_dir.empty() ? "checkpoint" : "model", loaded.source);
}

}  // namespace

void register_generate(CLI::App& app, Runtime& rt) {
    auto* cmd = app.add_subcommand("generate", "Sample text from a checkpoint or a Hugging Face model directory (KV "
                                               "cache, streamed to stdout)");
    auto o = std::make_shared<GenerateOptions>();
    cmd->add_option("--checkpoint", o->checkpoint,
                    "a checkpoints/step_N directory, a checkpoints/ directory or a run directory");
    cmd->add_option("--model", o->model_dir,
                    "instead of --checkpoint: a Hugging Face model directory (config.json + safetensors; text goes "
                    "through its own tokenizer files), a hub cache folder models--ORG--NAME (its snapshot at "
                    "--revision), or a run or checkpoint directory of ours");
    add_revision_option(*cmd, &o->revision, "--revision", "--model and --tokenizer");
    cmd->add_option("--config,-c", o->config,
                    "YAML config of the model (default: the resolved config stored in the checkpoint's state.json)");
    cmd->add_option("--set", o->sets, "override a config key, e.g. --set run.threads=4 (repeatable)")
        ->allow_extra_args(false);
    cmd->add_option("--prompt,-p", o->prompt, "text to continue (empty: start from <|endoftext|>)");
    cmd->add_option("--prompt-ids", o->prompt_ids,
                    "token ids to continue, e.g. 1,17,300 (no tokenizer: the output is ids too)");
    add_sampling_options(*cmd, o->sampling, "stop after this many tokens");
    cmd->add_option("--tokenizer", o->tokenizer,
                    "tokenizer spec (default: the model directory's own files; for a checkpoint its run's "
                    "data.tokenizer); a model directory's generation_config.json adds its eos_token_id(s) to the ids "
                    "that stop generation");
    cmd->callback([o, &rt] {
        resolve_hub_options(o->revision, {&o->model_dir, &o->tokenizer}, "--revision", "--model or --tokenizer");
        run_generate(*o);
        rt.exit_code = 0;
    });
}

}  // namespace llmt::cli
