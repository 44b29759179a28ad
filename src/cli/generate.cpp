// `llmtrain generate`: sample text from a checkpoint with the KV-cache decoder (models/gpt2_decode.h)
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

#include "cli/command.h"
#include "config/loader.h"
#include "core/check.h"
#include "core/error.h"
#include "data/tokenizer.h"
#include "models/gpt2.h"
#include "models/gpt2_decode.h"
#include "models/gpt2_io.h"
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
    uint64_t seed = 1337;
};

void write_out(const std::string& s) {
    if (s.empty()) return;
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);  // stream: each token appears as soon as it is sampled
}

// The checkpoint's model: --config when given, else the resolved config the trainer stored in state.json.
config::Config checkpoint_config(const GenerateOptions& o, const train::Checkpoint& ck) {
    if (!o.config.empty()) return config::load_config_file(o.config, o.sets);
    if (!ck.state.contains("config") || !ck.state["config"].is_object())
        throw InputError(fmt::format("generate: {} has no \"config\" object; pass --config with the run's config.yaml",
                                     (ck.dir / train::kStateFile).string()));
    // JSON is YAML: the stored config goes through the same strict loader as a file.
    return config::load_config_string(ck.state["config"].dump(), (ck.dir / train::kStateFile).string(), o.sets);
}

void run_generate(const GenerateOptions& o) {
    LLMT_CHECK(o.max_new_tokens >= 0, "generate: --max-new-tokens must be >= 0, got {}", o.max_new_tokens);
    train::Checkpoint ck = [&] {
        try {
            return train::load_checkpoint(o.checkpoint);
        } catch (const CheckpointError& e) {
            // The path is user input: a wrong or empty one is a usage problem (exit 2).
            throw InputError(fmt::format("generate: --checkpoint '{}': {}", o.checkpoint, e.what()));
        }
    }();
    const config::Config cfg = checkpoint_config(o, ck);
    if (cfg.run.threads > 0) omp_set_num_threads(cfg.run.threads);
    models::Gpt2 model(models::Gpt2Config::from(cfg.model));
    models::gpt2_load_hf(model, model.params(), ck.model);
    const models::Gpt2Config& mc = model.config();

    const data::Tokenizer tok = data::Tokenizer::load(o.tokenizer.empty() ? cfg.data.tokenizer : o.tokenizer);
    std::vector<int32_t> seq;
    if (o.prompt.empty()) {
        seq.push_back(static_cast<int32_t>(tok.eot_token()));
    } else {
        for (uint32_t id : tok.encode(o.prompt, true)) seq.push_back(static_cast<int32_t>(id));
    }
    LLMT_CHECK(static_cast<int>(seq.size()) <= mc.block_size,
               "generate: the prompt is {} tokens, longer than the model's context (model.block_size {})", seq.size(),
               mc.block_size);
    // Ids the model predicts must also be ids the tokenizer can print.
    const int V = std::min<int>(mc.vocab_size, static_cast<int>(tok.vocab_size()));
    models::Sampler sampler({o.temperature, o.top_k, o.seed}, V);
    models::Gpt2Decoder dec(model);
    models::Utf8Stream text;
    write_out(o.prompt);

    const auto t0 = std::chrono::steady_clock::now();
    const float* logits = dec.prefill(seq);
    int generated = 0, reprimes = 0;
    bool eot = false;
    while (generated < o.max_new_tokens) {
        int32_t id = sampler.sample(logits);
        ++generated;
        if (static_cast<uint32_t>(id) == tok.eot_token()) {
            eot = true;
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
               s > 0 ? generated / s : 0.0, eot ? ", stopped at <|endoftext|>" : "",
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
    cmd->add_option("--seed", o->seed, "random seed: the same seed gives the same text")->capture_default_str();
    cmd->add_option("--tokenizer", o->tokenizer, "tokenizer spec (default: the config's data.tokenizer, gpt2)");
    cmd->callback([o, &rt] {
        run_generate(*o);
        rt.exit_code = 0;
    });
}

}  // namespace llmt::cli
