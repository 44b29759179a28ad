// `llmtrain generate`: sample text from a checkpoint with the model's KV-cache decoder (models/model.h)
// and the seeded sampler (models/sampler.h), streaming the text to stdout token by token.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cli/checkpoint_model.h"
#include "cli/command.h"
#include "cli/generation_stop.h"
#include "core/check.h"
#include "core/error.h"
#include "data/tokenizer.h"
#include "models/sampler.h"
#include "models/utf8_stream.h"
#include "train/checkpoint.h"

namespace llmt::cli {

namespace {

struct GenerateOptions {
    std::string checkpoint, config, prompt, tokenizer;
    std::vector<std::string> sets;
    int max_new_tokens = 100;
    float temperature = 0.8f;
    int top_k = 40;
    float top_p = 1.f;
    uint64_t seed = 1337;
};

void write_out(const std::string& s) {
    if (s.empty()) return;
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);  // stream: each token appears as soon as it is sampled
}

void run_generate(const GenerateOptions& o) {
    LLMT_CHECK(o.max_new_tokens >= 0, "generate: --max-new-tokens must be >= 0, got {}", o.max_new_tokens);
    const CheckpointModel loaded = load_checkpoint_model("generate", o.checkpoint, o.config, o.sets);
    const config::Config& cfg = loaded.config;
    const train::Checkpoint& ck = loaded.checkpoint;
    const models::Model& model = *loaded.model;
    if (cfg.run.threads > 0) omp_set_num_threads(cfg.run.threads);
    const models::ModelDims& mc = model.dims();

    const std::string tok_spec = o.tokenizer.empty() ? cfg.data.tokenizer : o.tokenizer;
    const data::Tokenizer tok = data::Tokenizer::load(tok_spec);
    // Every EOS id of the model directory's generation_config.json (Llama 3 Instruct: <|eot_id|> and
    // <|end_of_text|>), not just the end-of-text token: a fine-tuned chat model ends its turn with <|eot_id|>.
    const std::vector<uint32_t> stop = generation_stop_ids(tok, tokenizer_directory(tok_spec));
    // The tokenizer.json post-processor's tokens first (Llama 3.1: <|begin_of_text|>), as transformers'
    // encode(add_special_tokens=True) gives them; an empty prompt without them starts from end-of-text.
    std::vector<int32_t> seq;
    for (uint32_t id : tok.prefix_tokens()) seq.push_back(static_cast<int32_t>(id));
    if (o.prompt.empty() && seq.empty()) seq.push_back(static_cast<int32_t>(tok.eot_token()));
    for (uint32_t id : tok.encode(o.prompt, true)) seq.push_back(static_cast<int32_t>(id));
    LLMT_CHECK(static_cast<int>(seq.size()) <= mc.block_size,
               "generate: the prompt is {} tokens, longer than the model's context (model.block_size {})", seq.size(),
               mc.block_size);
    // Ids the model predicts must also be ids the tokenizer can print.
    const int V = std::min<int>(mc.vocab_size, static_cast<int>(tok.vocab_size()));
    models::Sampler sampler({o.temperature, o.top_k, o.seed, o.top_p}, V);
    const std::unique_ptr<models::Decoder> decoder = model.decoder();
    models::Decoder& dec = *decoder;
    models::Utf8Stream text;
    write_out(o.prompt);

    const auto t0 = std::chrono::steady_clock::now();
    const float* logits = dec.prefill(seq);
    int generated = 0, reprimes = 0;
    int32_t stopped_at = -1;
    while (generated < o.max_new_tokens) {
        int32_t id = sampler.sample(logits);
        ++generated;
        if (std::find(stop.begin(), stop.end(), static_cast<uint32_t>(id)) != stop.end()) {
            stopped_at = id;
            break;
        }
        seq.push_back(id);
        write_out(text.take(tok.token_bytes(static_cast<uint32_t>(id))));
        if (generated == o.max_new_tokens) break;
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
    write_out(text.finish());
    write_out("\n");
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print(stderr, "generate: {} tokens in {:.2f} s ({:.1f} tokens/s){}{}; checkpoint {}\n", generated, s,
               s > 0 ? generated / s : 0.0,
               stopped_at >= 0 ? fmt::format(", stopped at {}", tok.token_bytes(static_cast<uint32_t>(stopped_at))) : "",
               reprimes ? fmt::format(", context re-primed {}x", reprimes) : "", ck.dir.string());
}

}  // namespace

void register_generate(CLI::App& app, Runtime& rt) {
    auto* cmd = app.add_subcommand("generate", "Sample text from a checkpoint (KV cache, streamed to stdout)");
    auto o = std::make_shared<GenerateOptions>();
    cmd->add_option("--checkpoint", o->checkpoint, "a checkpoints/step_N directory, a checkpoints/ directory or a run directory")
        ->required();
    cmd->add_option("--config,-c", o->config,
                    "YAML config of the model (default: the resolved config stored in the checkpoint's state.json)");
    cmd->add_option("--set", o->sets, "override a config key, e.g. --set run.threads=4 (repeatable)")
        ->allow_extra_args(false);
    cmd->add_option("--prompt,-p", o->prompt, "text to continue (empty: start from <|endoftext|>)");
    cmd->add_option("--max-new-tokens,-n", o->max_new_tokens, "stop after this many tokens")->capture_default_str();
    cmd->add_option("--temperature,-t", o->temperature, "softmax temperature; 0 = greedy")->capture_default_str();
    cmd->add_option("--top-k,-k", o->top_k, "sample among the k most likely tokens; 0 = all")->capture_default_str();
    cmd->add_option("--top-p", o->top_p,
                    "then among the most likely tokens whose probability reaches p (nucleus); 1 = off")
        ->capture_default_str();
    cmd->add_option("--seed", o->seed, "random seed: the same seed gives the same text")->capture_default_str();
    cmd->add_option("--tokenizer", o->tokenizer,
                    "tokenizer spec (default: the config's data.tokenizer, gpt2); a model directory's "
                    "generation_config.json adds its eos_token_id(s) to the ids that stop generation");
    cmd->callback([o, &rt] {
        run_generate(*o);
        rt.exit_code = 0;
    });
}

}  // namespace llmt::cli
